"""The VHLO dialect's attribute and type encodings.

Kind codes and field orders follow StableHLO's
`stablehlo/dialect/VhloBytecode.cpp` (its `AttributeCode` / `TypeCode`
enums); enum attribute values follow `VhloEnums.td`. Tensor attributes keep
their blob exactly as stored (booleans bit-packed), so writing is
byte-exact; `tensor_values` / `tensor_blob` convert to and from numpy.
"""

from __future__ import annotations

import math

import numpy as np

import support
from stablehlo._src.bytecode import codec
from stablehlo._src.bytecode import tree

DIALECT = "vhlo"

_ENUM_ATTRS = ("ComparisonDirectionV1Attr", "ComparisonTypeV1Attr",
               "CustomCallApiVersionV1Attr", "FftTypeV1Attr",
               "PrecisionV1Attr", "RngAlgorithmV1Attr",
               "RngDistributionV1Attr", "TransposeV1Attr",
               "ResultAccuracyModeV1Attr")

ENUM_NAMES = {
    "ComparisonDirectionV1Attr": {0: "EQ", 1: "NE", 2: "GE", 3: "GT",
                                  4: "LE", 5: "LT"},
    "ComparisonTypeV1Attr": {0: "NOTYPE", 1: "FLOAT", 2: "TOTALORDER",
                             3: "SIGNED", 4: "UNSIGNED"},
    "CustomCallApiVersionV1Attr": {
        0: "API_VERSION_UNSPECIFIED", 1: "API_VERSION_ORIGINAL",
        2: "API_VERSION_STATUS_RETURNING",
        3: "API_VERSION_STATUS_RETURNING_UNIFIED",
        4: "API_VERSION_TYPED_FFI"},
    "FftTypeV1Attr": {0: "FFT", 1: "IFFT", 2: "RFFT", 3: "IRFFT"},
    "PrecisionV1Attr": {0: "DEFAULT", 1: "HIGH", 2: "HIGHEST"},
    "RngAlgorithmV1Attr": {0: "DEFAULT", 1: "THREE_FRY", 2: "PHILOX"},
    "RngDistributionV1Attr": {1: "UNIFORM", 2: "NORMAL"},
    "TransposeV1Attr": {0: "TRANSPOSE_INVALID", 1: "NO_TRANSPOSE",
                        2: "TRANSPOSE", 3: "ADJOINT"},
    "ResultAccuracyModeV1Attr": {0: "DEFAULT", 1: "HIGHEST", 2: "TOLERANCE"},
}

# Scalar element types: kind -> (asm name, bit width).
ELEMENT_TYPES = {
    "BooleanV1Type": ("bool", 1),
    "FloatBF16V1Type": ("bf16", 16),
    "FloatF16V1Type": ("f16", 16),
    "FloatF32V1Type": ("f32", 32),
    "FloatF64V1Type": ("f64", 64),
    "FloatF4E2M1FNV1Type": ("f4E2M1FN", 4),
    "FloatF6E2M3FNV1Type": ("f6E2M3FN", 6),
    "FloatF6E3M2FNV1Type": ("f6E3M2FN", 6),
    "FloatF8E3M4V1Type": ("f8E3M4", 8),
    "FloatF8E4M3V1Type": ("f8E4M3", 8),
    "FloatF8E4M3FNV1Type": ("f8E4M3FN", 8),
    "FloatF8E5M2V1Type": ("f8E5M2", 8),
    "FloatF8E4M3FNUZV1Type": ("f8E4M3FNUZ", 8),
    "FloatF8E5M2FNUZV1Type": ("f8E5M2FNUZ", 8),
    "FloatF8E4M3B11FNUZV1Type": ("f8E4M3B11FNUZ", 8),
    "FloatF8E8M0FNUV1Type": ("f8E8M0FNU", 8),
    "FloatTF32V1Type": ("tf32", 19),
    "IndexV1Type": ("index", 64),
    "IntegerSI2V1Type": ("i2", 2),
    "IntegerSI4V1Type": ("i4", 4),
    "IntegerSI8V1Type": ("i8", 8),
    "IntegerSI16V1Type": ("i16", 16),
    "IntegerSI32V1Type": ("i32", 32),
    "IntegerSI64V1Type": ("i64", 64),
    "IntegerUI2V1Type": ("ui2", 2),
    "IntegerUI4V1Type": ("ui4", 4),
    "IntegerUI8V1Type": ("ui8", 8),
    "IntegerUI16V1Type": ("ui16", 16),
    "IntegerUI32V1Type": ("ui32", 32),
    "IntegerUI64V1Type": ("ui64", 64),
}


def bit_width(type_) -> int | None:
  if isinstance(type_, tree.Type) and type_.dialect == DIALECT:
    entry = ELEMENT_TYPES.get(type_.kind)
    return entry[1] if entry else None
  return None


def _apint_width(fields):
  return bit_width(fields[0])


_ATTRS = {
    1: ("ArrayV1Attr", (("value", "attrs"),)),
    2: ("BooleanV1Attr", (("value", "varint"),)),
    6: ("DictionaryV1Attr", (("value", "attr_pairs"),)),
    8: ("FloatV1Attr", (("type", "type"), ("value", "apint:width"))),
    9: ("IntegerV1Attr", (("type", "type"), ("value", "apint:width"))),
    10: ("OutputOperandAliasV1Attr", (("outputTupleIndices", "svarints"),
                                      ("operandIndex", "svarint"),
                                      ("operandTupleIndices", "svarints"))),
    14: ("StringV1Attr", (("value", "string"),)),
    15: ("TensorV1Attr", (("type", "type"), ("data", "blob"))),
    17: ("TypeV1Attr", (("value", "type"),)),
    18: ("TypeExtensionsV1Attr", (("bounds", "svarints"),)),
    20: ("ResultAccuracyV1Attr", (("atol", "apint:f64"), ("rtol", "apint:f64"),
                                  ("ulps", "svarint"), ("mode", "attr"))),
    21: ("SubAxisInfoV1Attr", (("preSize", "svarint"), ("size", "svarint"))),
    22: ("AxisRefV1Attr", (("name", "attr"), ("subAxisInfo", "flag_attr"))),
    23: ("ReplicaGroupMeshAxesV1Attr", (("mesh", "attr"), ("axes", "attr"))),
    24: ("MeshAxisV1Attr", (("name", "attr"), ("size", "svarint"))),
    25: ("MeshV1Attr", (("axes", "attr"), ("device_ids", "opt_attr"))),
}
for _code, _name in zip((3, 4, 5, 7, 11, 12, 13, 16, 19), _ENUM_ATTRS):
  _ATTRS[_code] = (_name, (("value", "varint"),))

_SCALAR_TYPE_CODES = {
    0: "BooleanV1Type", 2: "FloatBF16V1Type", 3: "FloatF16V1Type",
    4: "FloatF32V1Type", 5: "FloatF64V1Type", 6: "FloatF8E4M3FNV1Type",
    7: "FloatF8E5M2V1Type", 9: "IndexV1Type", 10: "IntegerSI4V1Type",
    11: "IntegerSI8V1Type", 12: "IntegerSI16V1Type", 13: "IntegerSI32V1Type",
    14: "IntegerSI64V1Type", 15: "IntegerUI4V1Type", 16: "IntegerUI8V1Type",
    17: "IntegerUI16V1Type", 18: "IntegerUI32V1Type", 19: "IntegerUI64V1Type",
    22: "TokenV1Type", 26: "WitnessV1Type", 27: "FloatF8E4M3FNUZV1Type",
    28: "FloatF8E5M2FNUZV1Type", 29: "FloatF8E4M3B11FNUZV1Type",
    31: "IntegerSI2V1Type", 32: "IntegerUI2V1Type", 33: "NoneV1Type",
    34: "FloatTF32V1Type", 35: "FloatF8E4M3V1Type", 36: "FloatF8E3M4V1Type",
    37: "FloatF4E2M1FNV1Type", 38: "FloatF6E2M3FNV1Type",
    39: "FloatF6E3M2FNV1Type", 40: "FloatF8E8M0FNUV1Type",
}
_TYPES = {code: (name, ()) for code, name in _SCALAR_TYPE_CODES.items()}
_TYPES.update({
    1: ("ComplexV1Type", (("elementType", "type"),)),
    8: ("FunctionV1Type", (("inputs", "types"), ("outputs", "types"))),
    20: ("RankedTensorV1Type", (("shape", "svarints"), ("elementType", "type"))),
    21: ("RankedTensorV1TypeWithEncoding", (("encoding", "attr"),
                                            ("shape", "svarints"),
                                            ("elementType", "type"))),
    23: ("TupleV1Type", (("types", "types"),)),
    24: ("UniformQuantizedV1Type", (("flags", "varint"),
                                    ("storageType", "type"),
                                    ("expressedType", "type"),
                                    ("scale", "apint:f64"),
                                    ("zeroPoint", "svarint"),
                                    ("storageTypeMin", "svarint"),
                                    ("storageTypeMax", "svarint"))),
    25: ("UnrankedTensorV1Type", (("elementType", "type"),)),
    30: ("UniformQuantizedPerAxisV1Type", (("flags", "varint"),
                                           ("storageType", "type"),
                                           ("expressedType", "type"),
                                           ("quantizedDimension", "varint"),
                                           ("storageTypeMin", "svarint"),
                                           ("storageTypeMax", "svarint"),
                                           ("scales", "apints64"),
                                           ("zeroPoints", "svarints"))),
    41: ("RankedBufferV1Type", (("shape", "svarints"), ("elementType", "type"))),
    42: ("FutureV1Type", (("types", "types"),)),
})

CODEC = codec.register(codec.DialectCodec(
    dialect=DIALECT,
    attrs=_ATTRS,
    types=_TYPES,
    functions={"width": _apint_width, "f64": lambda fields: 64},
    # Every VHLO attribute is required (no OptionalAttr in VhloOps.td), so
    # ODS-generated writeProperties emits one reference per attribute.
    properties={"*": "attrs"},
))


def enum_name(attr: tree.Attr) -> str:
  """The symbol of a VHLO enum attribute, e.g. "EQ"."""
  names = ENUM_NAMES.get(attr.kind)
  if names is None:
    raise support.InvalidArgumentError(f"{attr.kind} is not a VHLO enum")
  value = attr.fields[0]
  if value not in names:
    raise support.InvalidArgumentError(
        f"{attr.kind}: no enumerator with value {value}")
  return names[value]


def is_enum(attr) -> bool:
  return isinstance(attr, tree.Attr) and attr.kind in ENUM_NAMES


def element_count(tensor_type: tree.Type) -> int:
  shape = CODEC.get(tensor_type, "shape")
  if any(d < 0 for d in shape):
    raise support.InvalidArgumentError(f"dynamic shape {shape} has no count")
  return math.prod(shape)


def _is_bool_tensor(tensor_type) -> bool:
  return (isinstance(tensor_type, tree.Type) and
          tensor_type.kind == "RankedTensorV1Type" and
          tensor_type.fields[1].kind == "BooleanV1Type")


_DTYPES: dict = {}  # element kind -> dtype, for the non-complex kinds


def _numpy_dtype(element: tree.Type):
  """The numpy dtype of a VHLO element type (ml_dtypes for the exotic)."""
  dtype = _DTYPES.get(element.kind)
  if dtype is not None:
    return dtype
  if element.kind != "ComplexV1Type":
    dtype = _numpy_dtype_uncached(element)
    _DTYPES[element.kind] = dtype
    return dtype
  return _numpy_dtype_uncached(element)


def _numpy_dtype_uncached(element: tree.Type):
  if element.kind == "ComplexV1Type":
    inner = _numpy_dtype(element.fields[0])
    return np.dtype(np.complex64 if inner == np.float32 else np.complex128)
  name = ELEMENT_TYPES.get(element.kind, (None,))[0]
  simple = {"bool": np.bool_, "f16": np.float16, "f32": np.float32,
            "f64": np.float64, "i8": np.int8, "i16": np.int16,
            "i32": np.int32, "i64": np.int64, "ui8": np.uint8,
            "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64,
            "index": np.int64}
  if name in simple:
    return np.dtype(simple[name])
  try:
    import ml_dtypes  # pylint: disable=g-import-not-at-top
  except ImportError as e:
    raise support.UnimplementedError(
        f"element type {name} needs ml_dtypes") from e
  extra = {"bf16": "bfloat16", "i2": "int2", "i4": "int4", "ui2": "uint2",
           "ui4": "uint4", "f8E4M3FN": "float8_e4m3fn",
           "f8E5M2": "float8_e5m2", "f8E4M3FNUZ": "float8_e4m3fnuz",
           "f8E5M2FNUZ": "float8_e5m2fnuz",
           "f8E4M3B11FNUZ": "float8_e4m3b11fnuz", "f8E4M3": "float8_e4m3",
           "f8E3M4": "float8_e3m4", "f4E2M1FN": "float4_e2m1fn",
           "f6E2M3FN": "float6_e2m3fn", "f6E3M2FN": "float6_e3m2fn",
           "f8E8M0FNU": "float8_e8m0fnu"}
  if name not in extra or not hasattr(ml_dtypes, extra[name]):
    raise support.UnimplementedError(f"no numpy dtype for element {name}")
  return np.dtype(getattr(ml_dtypes, extra[name]))


def tensor_values(attr: tree.Attr) -> np.ndarray:
  """The elements of a `TensorV1Attr` as a numpy array of its shape. A
  splat (one stored element) comes back as a read-only broadcast view, so
  a splat constant of a large shape costs no memory or time to read."""
  tensor_type, blob = attr.fields
  shape = tuple(CODEC.get(tensor_type, "shape"))
  n = element_count(tensor_type)
  if _is_bool_tensor(tensor_type):
    packed = (n + 7) // 8
    if len(blob) == 1 and blob[0] == 0xFF:
      return np.broadcast_to(np.ones((), np.bool_), shape)
    if len(blob) == packed and len(blob) != n:
      bits = np.unpackbits(np.frombuffer(blob, np.uint8), bitorder="little")
      return bits[:n].astype(np.bool_).reshape(shape)
    raw = np.frombuffer(blob, np.uint8).astype(np.bool_)
  else:
    raw = np.frombuffer(blob, _numpy_dtype(CODEC.get(tensor_type,
                                                     "elementType")))
  if raw.size == 1 and n != 1:
    return np.broadcast_to(raw.reshape(()), shape)
  if raw.size != n:
    raise support.DataLossError(
        f"tensor blob holds {raw.size} elements, type needs {n}")
  return raw.reshape(shape)


def tensor_blob(tensor_type: tree.Type, values: np.ndarray) -> bytes:
  """The blob upstream writes for `values` (bit-packed if boolean)."""
  values = np.asarray(values)
  n = element_count(tensor_type)
  if _is_bool_tensor(tensor_type):
    flat = values.astype(np.bool_).reshape(-1)
    if flat.size == 1 and n > 1:
      return b"\xff" if flat[0] else b"\x00"
    return np.packbits(flat, bitorder="little").tobytes()
  dtype = _numpy_dtype(CODEC.get(tensor_type, "elementType"))
  return np.ascontiguousarray(values.astype(dtype)).tobytes()
