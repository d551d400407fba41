"""Parsing of HLO attribute values (window, dim_labels, slice, padding,
metadata, replica groups, frontend attributes, ...).

`ValueParser.parse_plain_attr_value(spec)` dispatches on the attribute's
kind (`hlo_attrs.AttrKind`); the grammar of each syntax is in the method's
docstring. `hlo_parser.HloParser` adds the kinds that need IR context
(computations, instruction lists).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from xla import xla_data
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir.hlo_attrs import AttrKind
from xla.hlo.parser.hlo_lexer import Tok
from xla.hlo.parser.literal_parser import LiteralParser


class ValueParser(LiteralParser):
  """Adds attribute-value parsing to LiteralParser."""

  def parse_window(self) -> xla_data.Window:
    """`{size=3x3 stride=2x2 pad=0_1x0_1 lhs_dilate=.. rhs_dilate=..
    rhs_reversal=..}`, sub-attributes in any order, size required."""
    start = self.expect(Tok.LBRACE, "'{' to start a window")
    fields: dict[str, Any] = {}
    while not self.is_tok(Tok.RBRACE):
      tok = self.tok
      name = self.parse_attribute_name()
      if name in fields:
        self.error(f"sub-attribute '{name}=' already exists", tok)
      if name == "pad":
        fields[name] = self._parse_pad_pairs()
      elif name in ("size", "stride", "lhs_dilate", "rhs_dilate",
                    "rhs_reversal"):
        fields[name] = self._parse_dxd()
      else:
        self.error(f"unexpected window sub-attribute '{name}'", tok)
    self.advance()
    size = fields.get("size")
    if size is None:
      if fields:
        self.error("window is missing 'size='", start)
      return xla_data.Window()
    for name, values in fields.items():
      if len(values) != len(size):
        self.error(f"expects '{name}=' to have the same size as 'size='",
                   start)
    dims = []
    for i, s in enumerate(size):
      pad = fields.get("pad", [(0, 0)] * len(size))[i]
      dims.append(xla_data.WindowDimension(
          size=s, stride=fields.get("stride", [1] * len(size))[i],
          padding_low=pad[0], padding_high=pad[1],
          base_dilation=fields.get("lhs_dilate", [1] * len(size))[i],
          window_dilation=fields.get("rhs_dilate", [1] * len(size))[i],
          window_reversal=fields.get("rhs_reversal", [0] * len(size))[i] == 1))
    return xla_data.Window(tuple(dims))

  def _parse_dxd(self) -> list[int]:
    if self.is_tok(Tok.INT):
      return [self.parse_int()]
    tok = self.expect(Tok.DXD, "a number or an AxBxC pattern")
    return [int(v) for v in tok.value.split("x")]

  def _parse_pad_pairs(self) -> list[tuple[int, int]]:
    tok = self.expect(Tok.PAD, "a window pad pattern such as 0_0x3_3")
    pairs = []
    for part in tok.value.split("x"):
      nums = part.split("_")
      if len(nums) != 2:
        self.error("expects padding_low and padding_high separated by '_'",
                   tok)
      pairs.append((int(nums[0]), int(nums[1])))
    return pairs

  def parse_padding_config(self) -> xla_data.PaddingConfig:
    """`low_high(_interior)?` per dimension, joined by `x`."""
    tok = self.expect(Tok.PAD, "a padding config such as 0_0_0x3_3_1")
    dims = []
    for part in tok.value.split("x"):
      nums = [int(v) for v in part.split("_")]
      dims.append(xla_data.PaddingDimension(
          nums[0], nums[1], nums[2] if len(nums) == 3 else 0))
    return xla_data.PaddingConfig(tuple(dims))

  def parse_dim_labels(self) -> xla_data.ConvolutionDimensionNumbers:
    """`lhs_rhs->out`, e.g. `b01f_01io->b01f`; `?` marks unnamed dims."""
    tok = self.expect(Tok.DIM_LABELS,
                      "a dim labels pattern such as bf01_oi01->bf01")
    lhs, rest = tok.value.split("_", 1)
    rhs, out = rest.split("->")

    def side(labels: str, letters: str):
      seen = set()
      named = {}
      spatial = {}
      for i, c in enumerate(labels):
        if c == "?":
          continue
        if c in seen:
          self.error(f"expects unique dimension labels, but sees {labels}",
                     tok)
        seen.add(c)
        if c in letters:
          named[c] = i
        elif c.isdigit() and int(c) < len(labels):
          spatial[int(c)] = i
        else:
          self.error(f"expects [0-{len(labels) - 1}{letters}?] in dimension "
                     f"labels {labels}", tok)
      for c in letters:
        if c not in named:
          self.error(f"dimension labels {labels} have no '{c}'", tok)
      if sorted(spatial) != list(range(len(spatial))):
        self.error(f"spatial labels of {labels} are not 0..n-1", tok)
      return named, tuple(spatial[i] for i in range(len(spatial)))

    (ln, ls), (rn, rs), (on, os_) = (side(lhs, "bf"), side(rhs, "io"),
                                     side(out, "bf"))
    if not len(ls) == len(rs) == len(os_):
      self.error(f"input, kernel, and output must have same number of "
                 f"spatial dimensions, but got {len(ls)}, {len(rs)}, "
                 f"{len(os_)}", tok)
    return xla_data.ConvolutionDimensionNumbers(
        input_batch_dimension=ln["b"], input_feature_dimension=ln["f"],
        input_spatial_dimensions=ls,
        kernel_input_feature_dimension=rn["i"],
        kernel_output_feature_dimension=rn["o"],
        kernel_spatial_dimensions=rs,
        output_batch_dimension=on["b"], output_feature_dimension=on["f"],
        output_spatial_dimensions=os_)

  def parse_slice_ranges(self) -> tuple[tuple[int, int, int], ...]:
    """`{[start:limit(:stride)?], ...}`."""

    def one():
      tok = self.tok
      nums = self.parse_int_list(Tok.LSQUARE, Tok.RSQUARE, Tok.COLON)
      if len(nums) not in (2, 3):
        self.error(f"expects [start:limit:step] or [start:limit], but sees "
                   f"{len(nums)} elements", tok)
      return (nums[0], nums[1], nums[2] if len(nums) == 3 else 1)

    return tuple(self.parse_list(Tok.LBRACE, Tok.RBRACE, one))

  def parse_enum(self, spec: hlo_attrs.AttrSpec):
    tok = self.tok
    if tok.kind not in (Tok.IDENT, Tok.KEYWORD):
      self.error(f"expected a value for {spec.name}, saw {self.describe()}")
    self.advance()
    if spec.enum is None:
      return tok.value
    value = spec.enum.parse(tok.value)
    if value is None:
      self.error(f"unknown {spec.name} '{tok.value}'; expected one of "
                 f"{', '.join(spec.enum.spellings())}", tok)
    return value

  def parse_precision_list(self) -> tuple[xla_data.Precision, ...]:
    spec = hlo_attrs.AttrSpec("operand_precision", AttrKind.ENUM,
                              enum=hlo_attrs.PRECISION)
    return tuple(self.parse_list(Tok.LBRACE, Tok.RBRACE,
                                 lambda: self.parse_enum(spec)))

  def parse_shape_index(self) -> tuple[int, ...]:
    return self.parse_int_list()

  def parse_aliasing(self) -> tuple[xla_data.OutputOperandAliasing, ...]:
    """`{{out}: (operand, {operand_index}), ...}`."""

    def one():
      out = self.parse_shape_index()
      self.expect(Tok.COLON)
      self.expect(Tok.LPAREN)
      operand = self.parse_int()
      self.expect(Tok.COMMA)
      index = self.parse_shape_index()
      self.expect(Tok.RPAREN)
      return xla_data.OutputOperandAliasing(out, operand, index)

    return tuple(self.parse_list(Tok.LBRACE, Tok.RBRACE, one))

  def parse_replica_groups(self):
    """`{{0,1},{2,3}}` or `[groups,size]<=[dims](T(perm))?`."""
    if self.is_tok(Tok.LBRACE):
      return self.parse_int_list_list()
    start = self.tok
    shape = self.parse_int_list(Tok.LSQUARE, Tok.RSQUARE)
    if len(shape) != 2:
      self.error("iota replica groups need [num_groups,group_size]", start)
    self.expect(Tok.LEQ, "'<='")
    reshape = self.parse_int_list(Tok.LSQUARE, Tok.RSQUARE)
    perm = tuple(range(len(reshape)))
    if self.is_ident("T"):
      self.advance()
      perm = self.parse_int_list(Tok.LPAREN, Tok.RPAREN)
    if sorted(perm) != list(range(len(reshape))) or (
        math.prod(reshape) != shape[0] * shape[1]):
      self.error("inconsistent iota replica group list", start)
    return xla_data.IotaReplicaGroupList(shape[0], shape[1], reshape, perm)

  def parse_string_or_dict(self) -> str:
    if self.is_tok(Tok.LBRACE):
      return self.parse_raw_braced()
    return self.parse_string()

  def parse_frontend_attributes(self) -> dict[str, str]:
    result: dict[str, str] = {}

    def one():
      tok = self.tok
      key = self.parse_attribute_name()
      if key in result:
        self.error(f"duplicate frontend attribute '{key}'", tok)
      result[key] = self.parse_string_or_dict()

    self.parse_list(Tok.LBRACE, Tok.RBRACE, one)
    return result

  def parse_metadata(self) -> xla_data.OpMetadata:
    """`{op_type="..." op_name="..." source_line=3 ...}`."""
    ints = ("source_line", "source_end_line", "source_column",
            "source_end_column", "stack_frame_id")
    strings = ("op_type", "op_name", "source_file", "deduplicated_name",
               "scheduling_name")
    fields: dict[str, Any] = {}
    self.expect(Tok.LBRACE, "'{' to start metadata")
    while not self.is_tok(Tok.RBRACE):
      self.eat(Tok.COMMA)
      tok = self.tok
      name = self.parse_attribute_name()
      if name in fields:
        self.error(f"attribute {name} already exists", tok)
      if name in ints:
        value = self.parse_int()
        if not -(2**31) <= value < 2**31:
          self.error("value out of range for int32_t", tok)
        fields[name] = value
      elif name in strings:
        fields[name] = self.parse_string()
      elif name == "profile_type":
        fields[name] = self.parse_int_list()
      else:
        self.error(f"unexpected metadata attribute \"{name}\"", tok)
    self.advance()
    return xla_data.OpMetadata(**fields)

  def parse_bool_list(self) -> tuple[bool, ...]:
    """`true` | `false` | `{true,false,...}`."""
    if self.tok.kind == Tok.KEYWORD and self.tok.value in ("true", "false"):
      return (self.parse_bool(),)
    return tuple(self.parse_list(Tok.LBRACE, Tok.RBRACE, self.parse_bool))

  def parse_plain_attr_value(self, spec: hlo_attrs.AttrSpec):
    """The value of an attribute of any kind not needing IR context."""
    kind = spec.kind
    if kind == AttrKind.BOOL:
      return self.parse_bool()
    if kind == AttrKind.INT:
      return self.parse_int()
    if kind == AttrKind.FLOAT:
      tok = self.tok
      value = self.parse_double()
      if abs(value) > np.finfo(np.float32).max and math.isfinite(value):
        self.error("value out of range for float", tok)
      return float(np.float32(value))
    if kind == AttrKind.STRING:
      return self.parse_string()
    if kind == AttrKind.INT_LIST:
      return self.parse_int_list()
    if kind == AttrKind.INT_LIST_LIST:
      return self.parse_int_list_list()
    if kind == AttrKind.ENUM:
      return self.parse_enum(spec)
    if kind == AttrKind.WINDOW:
      return self.parse_window()
    if kind == AttrKind.DIM_LABELS:
      return self.parse_dim_labels()
    if kind == AttrKind.SLICE_RANGES:
      return self.parse_slice_ranges()
    if kind == AttrKind.PADDING_CONFIG:
      return self.parse_padding_config()
    if kind == AttrKind.PRECISION_LIST:
      return self.parse_precision_list()
    if kind == AttrKind.SHAPE:
      return self.parse_shape()
    if kind == AttrKind.SHAPE_LIST:
      return self.parse_shape_list()
    if kind == AttrKind.LITERAL:
      return self.parse_literal()
    if kind == AttrKind.ALIASING:
      return self.parse_aliasing()
    if kind == AttrKind.REPLICA_GROUPS:
      return self.parse_replica_groups()
    if kind == AttrKind.RAW:
      return hlo_attrs.RawText(self.parse_raw_braced())
    if kind == AttrKind.FRONTEND_ATTRIBUTES:
      return self.parse_frontend_attributes()
    if kind == AttrKind.METADATA:
      return self.parse_metadata()
    if kind == AttrKind.BOOL_LIST:
      return self.parse_bool_list()
    if kind == AttrKind.STRING_OR_DICT:
      return self.parse_string_or_dict()
    raise AssertionError(f"attribute kind {kind} needs IR context")
