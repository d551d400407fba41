"""The HLO text parser (xla/hlo/parser/hlo_parser.cc): text -> HloModule.

Grammar (attribute values: see value_parser):

  module       ::= ('HloModule' name (',' module_attr)*)? stack_frames?
                   computation+
  computation  ::= 'ENTRY'? name (param_list '->' shape)?
                   '{' instruction+ '}' (',' 'execution_thread=' string)?
  instruction  ::= 'ROOT'? name '=' shape? opcode operands (',' attribute)*
  operands     ::= '(' (operand (',' operand)*)? ')'
  operand      ::= shape? name | shape? opcode operands   (nested, no attrs)

`parameter(N)` and `constant(literal)` carry their number / literal in the
parentheses. Names may be written with or without `%`. The ENTRY computation
(or else the last one) is the module's entry. Shapes without a layout get
the default layout, as in XLA (`fill_missing_layouts=False` keeps them
without).

Errors are `HloParseError` (support.InvalidArgumentError) carrying
`line:col`; valid text that uses a feature not supported here raises
`HloParseUnimplementedError` (support.UnimplementedError), also positioned.
"""

from __future__ import annotations

from typing import Optional

import support
from xla import shape_util
from xla import xla_data
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_opcode
from xla.hlo.ir.hlo_attrs import AttrKind
from xla.hlo.ir.hlo_computation import HloComputation
from xla.hlo.ir.hlo_instruction import HloInstruction
from xla.hlo.ir.hlo_module import BufferDonor
from xla.hlo.ir.hlo_module import HloModule
from xla.hlo.ir.hlo_module import InputOutputAlias
from xla.hlo.ir.hlo_opcode import HloOpcode
from xla.hlo.parser.hlo_lexer import Tok
from xla.hlo.parser.hlo_lexer import Token
from xla.hlo.parser.parser_base import HloParseError
from xla.hlo.parser.parser_base import HloParseUnimplementedError
from xla.hlo.parser.value_parser import ValueParser
from xla.layout import Layout
from xla.literal import Literal
from xla.service import instruction_shape_inference
from xla.shape import ProgramShape
from xla.shape import Shape

__all__ = [
    "HloParseError", "HloParseUnimplementedError",
    "parse_and_return_unverified_module", "parse_and_return_verified_module",
    "parse_shape", "parse_layout", "parse_literal",
]

O = HloOpcode

# Opcodes whose fixed operand count the parser checks beyond the table.
_EXTRA_ARITY = {O.kConvolution: 2}


class _Scope:
  """The instructions of one computation, by name."""

  def __init__(self, computation: HloComputation):
    self.computation = computation
    self.names: dict[str, tuple[HloInstruction, Token]] = {}
    self.last: Optional[HloInstruction] = None


class HloParser(ValueParser):
  """Parses one module; see the module docstring."""

  def __init__(self, text: str, fill_missing_layouts: bool = True):
    super().__init__(text, fill_missing_layouts)
    self.computations: dict[str, tuple[HloComputation, Token]] = {}
    self.created: list[HloComputation] = []
    self._anonymous = 0

  # -- module ------------------------------------------------------------------

  def parse_module(self) -> HloModule:
    name = None
    header: dict[str, object] = {}
    if self.is_keyword("HloModule"):
      self.advance()
      name = self.parse_name("module name")
      header = self._parse_module_attrs()
    module = HloModule(name or "module")
    if self.is_keyword("FileNames"):
      module.stack_frame_index = self._parse_stack_frame_index()
    entry = None
    while not self.is_tok(Tok.EOF):
      entry_tok = self.tok
      comp, is_entry = self._parse_computation()
      if is_entry:
        if entry is not None:
          self.error("expects only one ENTRY", entry_tok)
        entry = comp
    if not self.created:
      self.error("expected a computation")
    entry = entry or self.created[-1]
    if name is None:
      module.name = f"module_{entry.name}"
    for comp in self.created:
      module.add_computation(comp, is_entry=comp is entry)
    self._apply_module_attrs(module, header)
    return module

  def _parse_module_attrs(self) -> dict[str, object]:
    attrs: dict[str, object] = {}
    while self.eat(Tok.COMMA):
      tok = self.tok
      key = self.parse_attribute_name()
      if key in attrs:
        self.error(f"attribute {key} already exists", tok)
      if key in ("is_scheduled", "alias_passthrough_params"):
        attrs[key] = self.parse_bool()
      elif key in ("replica_count", "num_partitions"):
        attrs[key] = self.parse_int()
      elif key == "entry_computation_layout":
        attrs[key] = self._parse_computation_layout()
      elif key == "input_output_alias":
        attrs[key] = self._parse_input_output_alias()
      elif key == "buffer_donor":
        attrs[key] = self._parse_buffer_donor()
      elif key == "frontend_attributes":
        attrs[key] = self.parse_frontend_attributes()
      elif key in ("allow_spmd_sharding_propagation_to_parameters",
                   "allow_spmd_sharding_propagation_to_output"):
        attrs[key] = self.parse_bool_list()
      elif key == "origin_recovery_table":
        attrs[key] = hlo_attrs.RawText(self.parse_raw_braced())
      else:
        self.error(f"unexpected module attribute \"{key}\"", tok)
    return attrs

  def _apply_module_attrs(self, module: HloModule, attrs) -> None:
    config = module.config
    module.is_scheduled = bool(attrs.get("is_scheduled", False))
    config.alias_passthrough_params = bool(
        attrs.get("alias_passthrough_params", False))
    config.replica_count = attrs.get("replica_count", 1)
    config.num_partitions = attrs.get("num_partitions", 1)
    config.use_spmd_partitioning = config.num_partitions != 1
    if "entry_computation_layout" in attrs:
      config.entry_computation_layout = attrs["entry_computation_layout"]
    for key in ("allow_spmd_sharding_propagation_to_parameters",
                "allow_spmd_sharding_propagation_to_output"):
      if key in attrs:
        setattr(config, key, tuple(attrs[key]))
    module.input_output_aliases = list(attrs.get("input_output_alias", ()))
    module.buffer_donors = list(attrs.get("buffer_donor", ()))
    module.frontend_attributes = dict(attrs.get("frontend_attributes", {}))
    module.origin_recovery_table = attrs.get("origin_recovery_table")

  def _parse_computation_layout(self) -> ProgramShape:
    """`{(shape, ...)->shape}`."""
    self.expect(Tok.LBRACE, "'{' to start the computation layout")
    params = self.parse_list(Tok.LPAREN, Tok.RPAREN, self.parse_shape)
    self.expect(Tok.ARROW, "'->' before the result shape")
    result = self.parse_shape()
    self.expect(Tok.RBRACE, "'}' at the end of the computation layout")
    return ProgramShape(tuple(params), result)

  def _parse_input_output_alias(self) -> list[InputOutputAlias]:
    """`{ {out}: (param, {index}(, may-alias|must-alias)?), ... }`."""

    def one():
      out = self.parse_shape_index()
      self.expect(Tok.COLON)
      self.expect(Tok.LPAREN)
      param = self.parse_int()
      self.expect(Tok.COMMA)
      index = self.parse_shape_index()
      must = False
      if self.eat(Tok.COMMA):
        tok = self.tok
        kind = self.parse_name("alias kind")
        if kind not in ("may-alias", "must-alias"):
          self.error("unexpected aliasing kind; expected may-alias or "
                     "must-alias", tok)
        must = kind == "must-alias"
      self.expect(Tok.RPAREN)
      return InputOutputAlias(out, param, index, must)

    return self.parse_list(Tok.LBRACE, Tok.RBRACE, one)

  def _parse_buffer_donor(self) -> list[BufferDonor]:

    def one():
      self.expect(Tok.LPAREN)
      param = self.parse_int()
      self.expect(Tok.COMMA)
      index = self.parse_shape_index()
      self.expect(Tok.RPAREN)
      return BufferDonor(param, index)

    return self.parse_list(Tok.LBRACE, Tok.RBRACE, one)

  def _parse_stack_frame_index(self) -> xla_data.StackFrameIndex:
    self.expect(Tok.KEYWORD, value="FileNames")
    file_names = self._numbered(self.parse_string)
    self.expect(Tok.KEYWORD, "'FunctionNames'", value="FunctionNames")
    function_names = self._numbered(self.parse_string)
    self.expect(Tok.KEYWORD, "'FileLocations'", value="FileLocations")
    keys = ("file_name_id", "function_name_id", "line", "end_line", "column",
            "end_column")
    locations = self._numbered(
        lambda: xla_data.FileLocation(**self._int_fields(keys)))
    self.expect(Tok.KEYWORD, "'StackFrames'", value="StackFrames")
    frames = self._numbered(lambda: xla_data.StackFrame(**self._int_fields(
        ("file_location_id", "parent_frame_id"))))
    return xla_data.StackFrameIndex(tuple(file_names), tuple(function_names),
                                    tuple(locations), tuple(frames))

  def _numbered(self, item) -> list:
    """`(int item)*`, the ints counting 1, 2, ..."""
    items = []
    while self.is_tok(Tok.INT):
      tok = self.tok
      if self.parse_int() != len(items) + 1:
        self.error(f"expected entry number {len(items) + 1}", tok)
      items.append(item())
    return items

  def _int_fields(self, keys) -> dict[str, int]:
    start = self.expect(Tok.LBRACE)
    fields: dict[str, int] = {}
    while not self.is_tok(Tok.RBRACE):
      self.eat(Tok.COMMA)
      tok = self.tok
      key = self.parse_attribute_name()
      if key not in keys or key in fields:
        self.error(f"unexpected or repeated sub-attribute {key}", tok)
      fields[key] = self.parse_int()
    self.advance()
    missing = [k for k in keys if k not in fields]
    if missing:
      self.error(f"sub-attribute {missing[0]} is expected but not seen",
                 start)
    return fields

  # -- computations ------------------------------------------------------------

  def _parse_computation(self) -> tuple[HloComputation, bool]:
    is_entry = self.eat(Tok.KEYWORD, "ENTRY")
    name_tok = self.tok
    name = self.parse_name("computation name")
    signature = None
    if self.is_tok(Tok.LPAREN):
      signature = self._parse_signature()
    comp = self._parse_instruction_list(name)
    if signature is not None:
      self._check_signature(comp, *signature)
    if self.is_tok(Tok.COMMA) and self.lexer.look_ahead().kind == (
        Tok.ATTRIBUTE_NAME):
      self.advance()
      tok = self.tok
      key = self.parse_attribute_name()
      if key != "execution_thread":
        self.error(f"unexpected computation attribute \"{key}\"", tok)
      comp.execution_thread = self.parse_string()
    self._register_computation(name, comp, name_tok)
    return comp, is_entry

  def _register_computation(self, name: str, comp: HloComputation,
                            tok: Token) -> None:
    if name in self.computations:
      prev = self.computations[name][1]
      line = self.text.count("\n", 0, prev.start) + 1
      self.error(f"computation already exists: {name} (previously defined "
                 f"at line {line})", tok)
    self.computations[name] = (comp, tok)

  def _parse_signature(self):
    """`(name: shape, ...) -> shape`, checked against the body later."""
    params = []

    def one():
      tok = self.tok
      if tok.kind != Tok.NAME:
        self.error(f"expected 'name: shape', saw {self.describe()}")
      self.advance()
      self.eat(Tok.COLON)  # `%name:` lexes as a name and a colon
      params.append((tok, self.parse_shape()))

    self.parse_list(Tok.LPAREN, Tok.RPAREN, one)
    self.expect(Tok.ARROW, "'->' after the parameter list")
    result_tok = self.tok
    return params, result_tok, self.parse_shape()

  def _check_signature(self, comp: HloComputation, params, result_tok,
                       result: Shape) -> None:
    root = comp.root_instruction
    if not shape_util.compatible(root.shape, result):
      self.error(f"shape of computation {comp.name}, {result.to_string()}, "
                 f"is not compatible with that of its root instruction "
                 f"{root.name}, {root.shape.to_string()}", result_tok)
    if len(params) != comp.num_parameters:
      self.error(f"computation {comp.name} declares {len(params)} "
                 f"parameters but has {comp.num_parameters}", result_tok)
    for (tok, shape), param in zip(params, comp.parameter_instructions):
      if not shape_util.compatible(shape, param.shape):
        self.error(f"declared shape {shape.to_string()} of parameter "
                   f"{param.parameter_number} is not compatible with "
                   f"{param.shape.to_string()}", tok)

  def _parse_instruction_list(self, name: str) -> HloComputation:
    """`{ instruction+ }` -> a new computation."""
    open_tok = self.expect(Tok.LBRACE,
                           "'{' at the beginning of the instruction list")
    comp = HloComputation(name)
    scope = _Scope(comp)
    root = None
    while True:
      root_tok = self.tok
      is_root = self.eat(Tok.KEYWORD, "ROOT")
      instr = self._parse_instruction(scope)
      if is_root:
        if root is not None:
          self.error("one computation should have only one ROOT", root_tok)
        root = instr
      if self.is_tok(Tok.RBRACE):
        break
    self.advance()
    params = sorted(comp.parameter_instructions,
                    key=lambda p: p.parameter_number)
    for i, p in enumerate(params):
      if p.parameter_number != i:
        self.error(f"parameter numbers of computation {name} are not "
                   f"0..{len(params) - 1}: parameter {i} is missing",
                   open_tok)
    comp.set_root_instruction(root or scope.last)
    self.created.append(comp)
    return comp

  # -- instructions ------------------------------------------------------------

  def _parse_instruction(self, scope: _Scope) -> HloInstruction:
    name_tok = self.tok
    if name_tok.kind == Tok.ATTRIBUTE_NAME:  # `x=...` written without spaces
      self.advance()
    else:
      self.parse_name("instruction name")
      self.expect(Tok.EQUAL, "'=' in instruction")
    return self._parse_instruction_rhs(scope, name_tok.value, name_tok, True)

  def _parse_opcode(self) -> HloOpcode:
    tok = self.tok
    if tok.kind != Tok.IDENT:
      self.error(f"expected opcode, saw {self.describe()}")
    self.advance()
    if hlo_opcode.is_opcode_name(tok.value):
      return hlo_opcode.string_to_opcode(tok.value)
    for suffix in ("-start", "-update", "-done"):
      base = tok.value[:-len(suffix)]
      if tok.value.endswith(suffix) and hlo_opcode.is_opcode_name(base):
        self.unimplemented(f"async wrapper syntax '{tok.value}' (write "
                           f"async-start/async-update/async-done with "
                           f"calls=)", tok)
    self.error(f"expects opcode but sees: {tok.value}", tok)

  def _parse_instruction_rhs(self, scope: _Scope, name: Optional[str],
                             name_tok: Token,
                             allow_attributes: bool) -> HloInstruction:
    shape = self.parse_shape() if self.can_be_shape() else None
    opcode_tok = self.tok
    opcode = self._parse_opcode()
    if opcode in hlo_attrs.UNSUPPORTED_OPCODES:
      self.unimplemented(f"opcode {opcode.value}: "
                         f"{hlo_attrs.UNSUPPORTED_OPCODES[opcode]}",
                         opcode_tok)
    instr = HloInstruction(opcode, shape or Shape.tuple_of(()), name=name)
    if opcode == O.kParameter:
      self._need_shape(shape, opcode_tok)
      self.expect(Tok.LPAREN, "'(' before the parameter number")
      num_tok = self.tok
      number = self.parse_int("parameter number")
      if number < 0:
        self.error("parameter number must be >= 0", num_tok)
      self.expect(Tok.RPAREN, "')' after the parameter number")
      instr.parameter_number = number
      operands = []
    elif opcode == O.kConstant:
      self._need_shape(shape, opcode_tok)
      self.expect(Tok.LPAREN, "'(' before the constant literal")
      instr.literal = self.parse_literal_value(shape)
      self.expect(Tok.RPAREN, "')' after the constant literal")
      operands = []
    else:
      operands_tok = self.tok
      operands = self._parse_operands(scope)
      self._check_arity(opcode, operands, operands_tok)
    for op in operands:
      instr.append_operand(op)
    self._parse_attributes(instr, scope, allow_attributes, opcode_tok)
    if shape is None:
      with self.at(opcode_tok):
        inferred = instruction_shape_inference.infer_instruction_shape(instr)
      if self.fill_missing_layouts:
        inferred = shape_util.with_default_layouts(inferred)
      instr.shape = inferred
    self._check_structure(instr, opcode_tok)
    if instr.opcode == O.kParameter and (
        instr.parameter_number in {p.parameter_number for p in
                                   scope.computation.parameter_instructions}):
      self.error(f"parameter number {instr.parameter_number} already "
                 f"allocated in this computation", opcode_tok)
    if name is None:  # a nested instruction
      self._anonymous += 1
      instr.name = f"{opcode.value}.anon.{self._anonymous}"
    elif name in scope.names:
      prev = scope.names[name][1]
      line = self.text.count("\n", 0, prev.start) + 1
      self.error(f"instruction already exists: {name} (previously defined "
                 f"at line {line})", name_tok)
    with self.at(name_tok):
      scope.computation.add_instruction(instr)
    scope.names[instr.name] = (instr, name_tok)
    scope.last = instr
    return instr

  def _need_shape(self, shape: Optional[Shape], tok: Token) -> None:
    if shape is None:
      self.error(f"cannot infer shape for opcode: {tok.value}", tok)

  def _check_arity(self, opcode: HloOpcode, operands, tok: Token) -> None:
    expected = _EXTRA_ARITY.get(opcode, hlo_opcode.arity(opcode))
    if expected is not None and len(operands) != expected:
      self.error(f"expects {expected} operands, but has {len(operands)} "
                 f"operands", tok)

  def _parse_operands(self, scope: _Scope) -> list[HloInstruction]:
    self.expect(Tok.LPAREN, "'(' at the beginning of operands")
    operands = []
    if not self.is_tok(Tok.RPAREN):
      operands.append(self._parse_operand(scope))
      while self.eat(Tok.COMMA):
        operands.append(self._parse_operand(scope))
    self.expect(Tok.RPAREN, "')' at the end of operands")
    return operands

  def _parse_operand(self, scope: _Scope) -> HloInstruction:
    start = self.lexer.save()
    shape = self.parse_shape() if self.can_be_shape() else None
    tok = self.tok
    if tok.kind in (Tok.NAME, Tok.IDENT):
      nxt = self.lexer.look_ahead().kind
      if tok.kind == Tok.NAME or nxt in (Tok.COMMA, Tok.RPAREN):
        self.advance()
        entry = scope.names.get(tok.value)
        if entry is None:
          self.error(f"instruction does not exist: {tok.value}", tok)
        instr = entry[0]
        if shape is not None and not shape_util.compatible(shape,
                                                           instr.shape):
          self.error(f"the declared operand shape {shape} is not compatible "
                     f"with the shape of the operand instruction "
                     f"{instr.shape}", tok)
        return instr
      if tok.kind == Tok.IDENT and nxt == Tok.LPAREN:
        self.lexer.restore(start)
        return self._parse_instruction_rhs(scope, None, tok, False)
    self.error(f"expected an operand name or a nested instruction, saw "
               f"{self.describe()}")

  def _parse_attributes(self, instr: HloInstruction, scope: _Scope,
                        allow: bool, opcode_tok: Token) -> None:
    seen: set[str] = set()
    while allow and self.is_tok(Tok.COMMA) and (
        self.lexer.look_ahead().kind == Tok.ATTRIBUTE_NAME):
      self.advance()
      tok = self.tok
      key = self.parse_attribute_name()
      if key in seen:
        self.error(f"attribute {key} already exists", tok)
      seen.add(key)
      spec = hlo_attrs.attr_spec(instr.opcode, key)
      field = None
      if spec is None and key in hlo_attrs.COMMON_BY_TEXT:
        field, spec = hlo_attrs.COMMON_BY_TEXT[key]
      if spec is None:
        allowed = [s.name for s in hlo_attrs.attr_specs(instr.opcode)]
        allowed += [s.name for _, s in hlo_attrs.COMMON_ATTRS]
        self.error(f"unexpected attribute \"{key}\" for {instr.opcode.value}."
                   f" Allowed attributes: {', '.join(allowed)}", tok)
      value_tok = self.tok
      value = self._parse_attr_value(spec, scope)
      with self.at(value_tok):
        if field is None:
          instr.set_attr(key, value)
        elif field == "control_predecessors":
          for pred in value:
            pred.add_control_dependency_to(instr)
        else:
          setattr(instr, field, value)
    for spec in hlo_attrs.attr_specs(instr.opcode):
      if spec.required and spec.name not in instr.attrs:
        self.error(f"attribute {spec.name} is expected but not seen",
                   opcode_tok)

  def _parse_attr_value(self, spec: hlo_attrs.AttrSpec, scope: _Scope):
    if spec.kind == AttrKind.COMPUTATION:
      return self._parse_computation_ref()
    if spec.kind == AttrKind.COMPUTATION_LIST:
      return tuple(self.parse_list(Tok.LBRACE, Tok.RBRACE,
                                   self._parse_computation_ref))
    if spec.kind == AttrKind.INSTRUCTION_LIST:

      def one():
        tok = self.tok
        name = self.parse_name("instruction name")
        if name not in scope.names:
          self.error(f"instruction '{name}' is not defined", tok)
        return scope.names[name][0]

      return tuple(self.parse_list(Tok.LBRACE, Tok.RBRACE, one))
    return self.parse_plain_attr_value(spec)

  def _parse_computation_ref(self) -> HloComputation:
    if self.is_tok(Tok.LBRACE):  # an anonymous nested computation
      self._anonymous += 1
      return self._parse_instruction_list("_")
    tok = self.tok
    name = self.parse_name("computation name")
    if name not in self.computations:
      self.error(f"computation does not exist: {name}", tok)
    return self.computations[name][0]

  def _check_structure(self, instr: HloInstruction, tok: Token) -> None:
    """Operand-structure rules XLA's parser enforces per opcode."""
    op, n = instr.opcode, instr.operand_count
    if op in (O.kReduce, O.kReduceWindow) and n % 2:
      self.error(f"expects an even number of operands, but has {n} "
                 f"operands", tok)
    if op == O.kScatter and n % 2 == 0:
      self.error(f"expects an odd number of operands, but has {n} operands",
                 tok)
    if op in (O.kSort, O.kConcatenate, O.kGetDimensionSize,
              O.kSetDimensionSize) and len(instr.dimensions) != 1:
      self.error(f"{op.value} expects exactly one dimension", tok)
    if op == O.kBroadcast and "dimensions" not in instr.attrs:
      if not instr.operand(0).shape.is_scalar():
        self.error("attribute dimensions is expected but not seen", tok)
    if op == O.kConditional:
      index = instr.operand(0).shape if n else None
      if index is None or not index.is_scalar():
        self.error("the first operand of conditional must be a scalar", tok)
      by_pred = ("true_computation" in instr.attrs or
                 "false_computation" in instr.attrs)
      if index.element_type == xla_data.PrimitiveType.PRED:
        if not ("true_computation" in instr.attrs and
                "false_computation" in instr.attrs) or (
                    "branch_computations" in instr.attrs):
          self.error("a PRED conditional needs true_computation= and "
                     "false_computation=", tok)
      elif index.element_type == xla_data.PrimitiveType.S32:
        if by_pred or "branch_computations" not in instr.attrs:
          self.error("an S32 conditional needs branch_computations=", tok)
      else:
        self.error("the first operand of conditional must be a scalar of "
                   "PRED or S32", tok)
      if len(instr.branch_computations) + 1 != n or not (
          instr.branch_computations):
        self.error(f"conditional has {n - 1} branch operands for "
                   f"{len(instr.branch_computations)} branches", tok)
    if op == O.kCustomCall and "to_apply" in instr.attrs and (
        "called_computations" in instr.attrs):
      self.error("a single instruction can't have both to_apply and "
                 "called_computations", tok)
    if op == O.kDynamicSlice and n >= 1:
      rank = instr.operand(0).shape.rank
      if n != 1 + rank and not (n == 2 and instr.operand(1).shape.rank == 1):
        self.error("wrong number of operands for dynamic-slice", tok)
    if op == O.kDynamicUpdateSlice:
      rank = instr.operand(0).shape.rank if n else 0
      if n < 2 or (n != 2 + rank and
                   not (n == 3 and instr.operand(2).shape.rank == 1)):
        self.error("wrong number of operands for dynamic-update-slice", tok)


# -- entry points --------------------------------------------------------------


def _run(text: str, fn):
  """Runs `fn(parser)`; anything but a positioned error becomes one."""
  parser = HloParser(text)
  try:
    return fn(parser)
  except (HloParseError, HloParseUnimplementedError):
    raise
  except support.UnimplementedError as e:
    raise HloParseUnimplementedError(text, parser.tok.start, str(e)) from e
  except support.XlaError as e:
    raise HloParseError(text, parser.tok.start, str(e)) from e
  except RecursionError as e:
    raise HloParseError(text, parser.tok.start,
                        "input nested too deeply") from e
  except (ValueError, TypeError, KeyError, IndexError, OverflowError,
          AttributeError) as e:
    raise HloParseError(
        text, parser.tok.start,
        f"internal parser error: {type(e).__name__}: {e}") from e


def _whole(parser: HloParser, fn):
  value = fn()
  if not parser.is_tok(Tok.EOF):
    parser.error(f"extra content after the value: {parser.describe()}")
  return value


def parse_and_return_unverified_module(
    text: str, fill_missing_layouts: bool = True) -> HloModule:
  """Parses HLO module text (with or without the `HloModule` header)."""

  def fn(parser: HloParser):
    parser.fill_missing_layouts = fill_missing_layouts
    return parser.parse_module()

  return _run(text, fn)


def parse_and_return_verified_module(text: str) -> HloModule:
  """Parses and runs the HLO verifier (raises its errors)."""
  # Imported here: the verifier is a separate, heavier layer.
  from xla.service import hlo_verifier  # pylint: disable=g-import-not-at-top
  module = parse_and_return_unverified_module(text)
  hlo_verifier.verify(module)
  return module


def parse_shape(text: str) -> Shape:
  return _run(text, lambda p: _whole(p, p.parse_shape))


def parse_layout(text: str) -> Layout:
  return _run(text, lambda p: _whole(p, p.parse_layout))


def parse_literal(text: str) -> Literal:
  """A literal with its shape, e.g. `f32[2] {1, 2}` or `(s32[] 1, pred[]
  true)`."""
  return _run(text, lambda p: _whole(p, p.parse_literal))
