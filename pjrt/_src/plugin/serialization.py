"""The plugin's serialized executable format (PJRT_Executable_Serialize).

A serialized executable keeps what is needed to rebuild it, not machine
code: the original program bytes (for JAX, a StableHLO portable artifact,
which stays loadable across versions) and the serialized compile options,
plus a little metadata. Loading compiles again.

Layout (integers little-endian):

  magic      8 bytes   b"OXCPUEX\\0"
  version    u32       FORMAT_VERSION
  header     u32 size, then that many bytes of UTF-8 JSON:
             {"format", "name", "backend", "plugin", "code_size",
              "options_size"}
  code       code_size bytes
  options    options_size bytes
  checksum   32 bytes  SHA-256 of everything before it

Errors: bytes that do not start with the magic, or of a version this plugin
does not read, are INVALID_ARGUMENT; a truncated or corrupted file (checksum
mismatch, inconsistent sizes, bad header) is DATA_LOSS.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct

import support

MAGIC = b"OXCPUEX\0"
FORMAT_VERSION = 1
PLUGIN = "openxla_cpu"
_CHECKSUM_SIZE = 32
_MIN_SIZE = len(MAGIC) + 8 + _CHECKSUM_SIZE


@dataclasses.dataclass(frozen=True)
class SerializedExecutable:
  code: bytes
  format: str
  options: bytes
  name: str = ""
  backend: str = ""


def serialize(executable: SerializedExecutable) -> bytes:
  header = json.dumps({
      "format": executable.format,
      "name": executable.name,
      "backend": executable.backend,
      "plugin": PLUGIN,
      "code_size": len(executable.code),
      "options_size": len(executable.options),
  }, sort_keys=True).encode("utf-8")
  body = b"".join([MAGIC, struct.pack("<II", FORMAT_VERSION, len(header)),
                   header, executable.code, executable.options])
  return body + hashlib.sha256(body).digest()


def deserialize(data: bytes) -> SerializedExecutable:
  """Parses and checks serialized bytes.

  Raises:
    support.InvalidArgumentError: not this format, or an unknown version.
    support.DataLossError: truncated or corrupted.
  """
  data = bytes(data)
  if not data.startswith(MAGIC):
    raise support.InvalidArgumentError(
        "not a serialized executable of the openxla_cpu plugin (bad magic "
        "number)")
  if len(data) < _MIN_SIZE:
    raise support.DataLossError(
        f"serialized executable truncated: {len(data)} bytes")
  version, header_size = struct.unpack_from("<II", data, len(MAGIC))
  if version != FORMAT_VERSION:
    raise support.InvalidArgumentError(
        f"serialized executable has format version {version}; this plugin "
        f"reads version {FORMAT_VERSION}")
  body, checksum = data[:-_CHECKSUM_SIZE], data[-_CHECKSUM_SIZE:]
  if hashlib.sha256(body).digest() != checksum:
    raise support.DataLossError(
        "serialized executable is corrupted (checksum mismatch)")
  start = len(MAGIC) + 8
  try:
    header = json.loads(body[start:start + header_size].decode("utf-8"))
    code_size = int(header["code_size"])
    options_size = int(header["options_size"])
    fmt = str(header["format"])
  except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
    raise support.DataLossError(
        f"serialized executable has a bad header: {e}") from None
  code_start = start + header_size
  if code_start + code_size + options_size != len(body) or min(
      code_size, options_size) < 0:
    raise support.DataLossError(
        "serialized executable sizes do not add up")
  code = body[code_start:code_start + code_size]
  options = body[code_start + code_size:]
  return SerializedExecutable(code=code, format=fmt, options=options,
                              name=str(header.get("name", "")),
                              backend=str(header.get("backend", "")))
