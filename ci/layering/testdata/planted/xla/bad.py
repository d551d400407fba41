import importlib
importlib.import_module("pjrt.client")  # planted
