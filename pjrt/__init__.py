"""PJRT: the plugin ABI (PJRT C API compatible), loader, client and plugins."""

from pjrt._src import abi as abi
from pjrt._src.abi_types import BufferType as BufferType
from pjrt._src.client import Buffer as Buffer
from pjrt._src.client import Client as Client
from pjrt._src.client import Device as Device
from pjrt._src.client import Event as Event
from pjrt._src.client import LoadedExecutable as LoadedExecutable
from pjrt._src.client import Memory as Memory
from pjrt._src.compile_options import compile_options as compile_options
from pjrt._src.loader import discover_plugins as discover_plugins
from pjrt._src.loader import get_plugin as get_plugin
from pjrt._src.loader import load_plugin as load_plugin
from pjrt._src.loader import Plugin as Plugin
from pjrt._src.loader import register_plugin as register_plugin
from pjrt._src.loader import registered_plugins as registered_plugins
from pjrt._src.loader import unregister_plugin as unregister_plugin
