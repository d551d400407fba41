"""Externalized constants: large dense constants kept in a sidecar file.

    data = serialize_portable_artifact(module, "1.15.0",
                                       externalize_threshold_bytes=1024,
                                       sidecar_path="weights.shlo-ext")
    module = deserialize_portable_artifact(data, "weights.shlo-ext")

Every `vhlo.constant_v1` whose raw tensor data (the bytes MLIR keeps: one
element for a splat, bit-packed booleans) is larger than the threshold is
written to the sidecar, once per distinct content (named by its sha256). The
artifact's constant becomes a builtin `dense_resource<key>` whose resource
entry, a string in the builtin dialect's resource group, records the sidecar
name, hash, offset and size. See EXTERN_CONSTANTS.md for the formats.

Loading maps the sidecar with `np.memmap`: constants are views of the file
(no heap copy); hashes are checked on load unless `verify_hashes=False`, in
which case no constant byte is read before it is used. A missing sidecar or
a size / hash / index mismatch raises `support.NotFoundError` or
`support.DataLossError`.

We write this ourselves: it is a small project-specific container format.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct

import numpy as np

import support
from stablehlo._src.bytecode import tree
from stablehlo._src.vhlo import vhlo_ir

MAGIC = b"SHLOEXT\0"
FORMAT_VERSION = 1
ALIGNMENT = 64
HEADER_SIZE = 64
# magic, format version, alignment, entry count, index offset, index size.
_HEADER = struct.Struct("<8sIIQQQ")
KEY_PREFIX = "stablehlo_extern_"
RECORD_PREFIX = "stablehlo.extern.v1"
_CONSTANT = "vhlo.constant_v1"


def _align(n: int, alignment: int = ALIGNMENT) -> int:
  return (n + alignment - 1) // alignment * alignment


def _is_tensor(attr) -> bool:
  return (isinstance(attr, tree.Attr) and attr.dialect == "vhlo" and
          attr.kind == "TensorV1Attr")


def _is_extern(attr) -> bool:
  return (isinstance(attr, tree.Attr) and attr.dialect == "builtin" and
          attr.kind == "DenseResourceElementsAttr" and
          attr.fields[1].key.startswith(KEY_PREFIX))


def format_record(fields: dict) -> str:
  """`stablehlo.extern.v1;file=..;sha256=..;offset=..;size=..`."""
  return ";".join([RECORD_PREFIX] + [f"{k}={fields[k]}" for k in (
      "file", "sha256", "offset", "size")])


def parse_record(text: str) -> dict:
  parts = text.split(";")
  if not parts or parts[0] != RECORD_PREFIX:
    raise support.DataLossError(
        f"extern constant record {text!r} is not {RECORD_PREFIX}")
  out = {}
  for part in parts[1:]:
    key, sep, value = part.partition("=")
    if not sep:
      raise support.DataLossError(f"malformed extern constant record {text!r}")
    out[key] = value
  if set(out) != {"file", "sha256", "offset", "size"}:
    raise support.DataLossError(f"malformed extern constant record {text!r}")
  try:
    out["offset"] = int(out["offset"])
    out["size"] = int(out["size"])
  except ValueError as e:
    raise support.DataLossError(
        f"malformed extern constant record {text!r}") from e
  return out


# --- writing ------------------------------------------------------------------


def write_sidecar(path, blobs: list) -> dict:
  """Writes `blobs` (distinct bytes) to `path`; sha256 hex -> index entry."""
  index = []
  offset = HEADER_SIZE
  for blob in blobs:
    digest = hashlib.sha256(blob).hexdigest()
    index.append({"name": f"sha256-{digest}", "sha256": digest,
                  "offset": offset, "size": len(blob)})
    offset = _align(offset + len(blob))
  index_bytes = json.dumps(index, sort_keys=True).encode("utf-8")
  header = _HEADER.pack(MAGIC, FORMAT_VERSION, ALIGNMENT, len(index), offset,
                        len(index_bytes))
  with open(path, "wb") as f:
    f.write(header.ljust(HEADER_SIZE, b"\0"))
    for entry, blob in zip(index, blobs):
      f.seek(entry["offset"])
      f.write(blob)
    f.seek(offset)
    f.write(index_bytes)
  return {e["sha256"]: e for e in index}


def externalize(root: vhlo_ir.VhloOp, sidecar_path,
                threshold_bytes: int) -> list:
  """Moves constants above `threshold_bytes` of `root` to `sidecar_path`.

  Rewrites their values to `dense_resource`s in place and returns the
  resource entries (builtin group) the file must carry.
  """
  if (not isinstance(threshold_bytes, int) or isinstance(threshold_bytes, bool)
      or threshold_bytes < 0):
    raise support.InvalidArgumentError(
        f"threshold_bytes must be a non-negative int, got {threshold_bytes!r}")
  name = os.path.basename(os.fspath(sidecar_path))
  if not name or ";" in name or "=" in name:
    raise support.InvalidArgumentError(
        f"sidecar file name {name!r} must be non-empty without ';' or '='")
  blobs = {}  # sha256 -> bytes, in first-use order.
  users = []
  for op in root.walk():
    value = op.named.get("value") if op.name == _CONSTANT else None
    if _is_tensor(value) and len(value.fields[1]) > threshold_bytes:
      blob = bytes(value.fields[1])
      digest = hashlib.sha256(blob).hexdigest()
      blobs.setdefault(digest, blob)
      users.append((op, value.fields[0], digest))
  index = write_sidecar(sidecar_path, list(blobs.values()))
  entries = []
  for digest in blobs:
    entry = index[digest]
    record = format_record({"file": name, "sha256": digest,
                            "offset": entry["offset"], "size": entry["size"]})
    entries.append(tree.ResourceEntry(KEY_PREFIX + digest, "string", record))
  for op, tensor_type, digest in users:
    op.named["value"] = tree.Attr(
        "builtin", "DenseResourceElementsAttr",
        (tensor_type, tree.ResourceHandle("builtin", KEY_PREFIX + digest)))
  return entries


# --- reading ------------------------------------------------------------------


class Sidecar:
  """A memory-mapped sidecar file and its index."""

  def __init__(self, path):
    path = os.fspath(path)
    if not os.path.isfile(path):
      raise support.NotFoundError(
          f"extern constants sidecar {path!r} does not exist")
    self.path = path
    size = os.path.getsize(path)
    if size < HEADER_SIZE:
      raise support.DataLossError(f"sidecar {path!r} is too short")
    self.data = np.memmap(path, dtype=np.uint8, mode="r")
    magic, fmt, alignment, count, index_offset, index_size = _HEADER.unpack(
        bytes(self.data[:_HEADER.size]))
    if magic != MAGIC:
      raise support.DataLossError(f"{path!r} is not an extern constants "
                                  "sidecar (bad magic)")
    if fmt != FORMAT_VERSION:
      raise support.UnimplementedError(
          f"sidecar {path!r} has format version {fmt}; only "
          f"{FORMAT_VERSION} is supported")
    if index_offset + index_size != size:
      raise support.DataLossError(
          f"sidecar {path!r}: index at {index_offset}+{index_size} does not "
          f"end the {size}-byte file")
    try:
      index = json.loads(bytes(self.data[index_offset:]).decode("utf-8"))
      self.entries = {e["sha256"]: e for e in index}
    except (ValueError, KeyError, TypeError) as e:
      raise support.DataLossError(f"sidecar {path!r}: bad index") from e
    if len(self.entries) != count:
      raise support.DataLossError(f"sidecar {path!r}: index holds "
                                  f"{len(self.entries)} entries, header {count}")
    for e in self.entries.values():
      if (e["offset"] % alignment or e["offset"] < HEADER_SIZE or
          e["offset"] + e["size"] > index_offset):
        raise support.DataLossError(
            f"sidecar {path!r}: entry {e['name']} lies outside the data")

  def blob(self, record: dict, verify: bool) -> np.ndarray:
    """The bytes `record` names, as a read-only view of the mapping."""
    entry = self.entries.get(record["sha256"])
    if entry is None:
      raise support.DataLossError(
          f"sidecar {self.path!r} has no constant with sha256 "
          f"{record['sha256']}")
    if (entry["offset"], entry["size"]) != (record["offset"], record["size"]):
      raise support.DataLossError(
          f"sidecar {self.path!r}: constant sha256-{record['sha256'][:16]}... "
          f"is {entry['size']} bytes at {entry['offset']}, the artifact "
          f"expects {record['size']} bytes at {record['offset']}")
    view = self.data[entry["offset"]:entry["offset"] + entry["size"]]
    if verify and hashlib.sha256(view).hexdigest() != record["sha256"]:
      raise support.DataLossError(
          f"sidecar {self.path!r}: constant {entry['name']} fails its sha256 "
          "check (the file was modified)")
    return view


def _records(f: tree.BytecodeFile) -> dict:
  out = {}
  for group in f.resources:
    if group.external or group.name != "builtin":
      continue
    for entry in group.entries:
      if entry.key.startswith(KEY_PREFIX):
        if entry.kind != "string":
          raise support.DataLossError(
              f"extern constant {entry.key} must be a string record")
        out[entry.key] = parse_record(entry.value)
  return out


def resolve(root: vhlo_ir.VhloOp, f: tree.BytecodeFile, sidecar_path,
            verify_hashes: bool = True) -> int:
  """Replaces extern constants in `root` by sidecar views; returns a count."""
  users = [op for op in root.walk()
           if op.name == _CONSTANT and _is_extern(op.named.get("value"))]
  if not users:
    return 0
  if sidecar_path is None:
    raise support.InvalidArgumentError(
        f"the artifact has {len(users)} extern constants; pass sidecar_path")
  records = _records(f)
  sidecar = Sidecar(sidecar_path)
  views = {}
  for op in users:
    tensor_type, handle = op.named["value"].fields
    record = records.get(handle.key)
    if record is None:
      raise support.DataLossError(
          f"extern constant {handle.key} has no resource record")
    if handle.key not in views:
      views[handle.key] = sidecar.blob(record, verify_hashes)
    op.named["value"] = tree.Attr("vhlo", "TensorV1Attr",
                                  (tensor_type, views[handle.key]))
  return len(users)
