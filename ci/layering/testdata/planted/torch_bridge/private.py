"""Planted: another component's private _src."""
from pjrt._src import client  # noqa
