"""Topology descriptions: the devices a client has, or would have.

A `Topology` lists device descriptions without a client: the client's own
(`PJRT_Client_TopologyDescription`, owned by the client) or a standalone one
(`PJRT_TopologyDescription_Create` with option "num_devices", or
deserialized), which `PJRT_Compile` compiles against.

Serialized form: b"OXCPUTP\\0" + UTF-8 JSON {"platform", "num_devices"}.
"""

from __future__ import annotations

import hashlib
import json

import support
from pjrt._src.plugin import handles
from pjrt._src.plugin import options as options_lib
from pjrt._src.plugin import runtime

TOPOLOGY = "PJRT_TopologyDescription"
MAGIC = b"OXCPUTP\0"


class Topology:
  """A PJRT_TopologyDescription."""

  def __init__(self, num_devices: int, client: runtime.Client | None = None):
    self.num_devices = num_devices
    self.client = client
    if client is not None:
      self.descriptions = [d.description for d in client.devices]
      self._own_descriptions = False
    else:
      self.descriptions = [runtime.DeviceDescription(i)
                           for i in range(num_devices)]
      for description in self.descriptions:
        description.handle = handles.TABLE.add(runtime.DESCRIPTION,
                                               description)
      self._own_descriptions = True
    self.platform_name = runtime.PLATFORM_NAME
    self.platform_version = (client.platform_version if client is not None
                             else "openxla-pjrt CPU plugin topology")
    self.attributes = {"num_devices": num_devices}
    self.c = runtime.CStrings()
    self.handle = handles.TABLE.add(TOPOLOGY, self)

  @classmethod
  def create(cls, named: dict) -> "Topology":
    named = dict(named)
    opts = options_lib.client_options(
        {k: v for k, v in named.items() if k == "num_devices"})
    unknown = sorted(set(named) - {"num_devices"})
    if unknown:
      raise support.InvalidArgumentError(
          f"unknown topology option(s) {', '.join(unknown)} (known: "
          "num_devices)")
    return cls(opts.num_devices)

  def destroy(self) -> None:
    handles.TABLE.remove(self.handle, TOPOLOGY)
    if self._own_descriptions:
      for description in self.descriptions:
        handles.TABLE.remove(description.handle, runtime.DESCRIPTION)

  def serialize(self) -> bytes:
    return MAGIC + json.dumps({"platform": self.platform_name,
                               "num_devices": self.num_devices},
                              sort_keys=True).encode("utf-8")

  @classmethod
  def deserialize(cls, data: bytes) -> "Topology":
    if not data.startswith(MAGIC):
      raise support.InvalidArgumentError(
          "not a serialized topology of the openxla_cpu plugin")
    try:
      fields = json.loads(data[len(MAGIC):].decode("utf-8"))
      num_devices = int(fields["num_devices"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
      raise support.DataLossError(f"corrupted serialized topology: {e}"
                                  ) from None
    if not 1 <= num_devices <= options_lib.MAX_DEVICES:
      raise support.DataLossError(
          f"serialized topology has {num_devices} devices")
    return cls(num_devices)

  def fingerprint(self) -> int:
    return int.from_bytes(hashlib.sha256(self.serialize()).digest()[:8],
                          "little")


# xla.PrimitiveType numbers (xla/xla_data.proto) of the PJRT buffer types,
# by name. Kept here so that only backends.py of the plugin imports //xla.
_PRIMITIVE_TYPES = {
    "PRED": 1, "S8": 2, "S16": 3, "S32": 4, "S64": 5, "U8": 6, "U16": 7,
    "U32": 8, "U64": 9, "F16": 10, "F32": 11, "F64": 12, "C64": 15,
    "BF16": 16, "TOKEN": 17, "C128": 18, "F8E5M2": 19, "F8E4M3FN": 20,
    "S4": 21, "U4": 22, "F8E4M3B11FNUZ": 23, "F8E5M2FNUZ": 24,
    "F8E4M3FNUZ": 25, "S2": 26, "U2": 27, "F8E4M3": 28, "F8E3M4": 29,
    "S1": 30, "U1": 31, "F4E2M1FN": 32, "F8E8M0FNU": 33,
}


def shape_proto(element_type_name: str, dims: tuple[int, ...],
                minor_to_major: tuple[int, ...] | None) -> bytes:
  """A serialized xla.ShapeProto with a dense layout.

  ShapeProto: 2 element_type (PrimitiveType), 3 dimensions (packed int64),
  5 layout (LayoutProto: 1 minor_to_major, packed int64).
  """
  try:
    primitive = _PRIMITIVE_TYPES[element_type_name]
  except KeyError:
    raise support.InvalidArgumentError(
        f"element type {element_type_name} has no XLA PrimitiveType"
    ) from None
  if minor_to_major is None:
    minor_to_major = tuple(reversed(range(len(dims))))
  if sorted(minor_to_major) != list(range(len(dims))):
    raise support.InvalidArgumentError(
        f"minor_to_major {list(minor_to_major)} is not a permutation of the "
        f"{len(dims)} dimensions")
  out = _key(2, 0) + _varint(int(primitive))
  if dims:
    out += _length_delimited(3, b"".join(_varint(d) for d in dims))
  layout = b""
  if minor_to_major:
    layout = _length_delimited(1, b"".join(_varint(d)
                                           for d in minor_to_major))
  return out + _length_delimited(5, layout)


def _varint(value: int) -> bytes:
  value &= (1 << 64) - 1
  out = bytearray()
  while True:
    byte, value = value & 0x7F, value >> 7
    out.append(byte | (0x80 if value else 0))
    if not value:
      return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
  return _varint(field << 3 | wire_type)


def _length_delimited(field: int, payload: bytes) -> bytes:
  return _key(field, 2) + _varint(len(payload)) + payload
