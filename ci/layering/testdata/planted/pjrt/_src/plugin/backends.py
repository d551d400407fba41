import xla  # allowed: the CPU plugin puts xla behind the ABI
