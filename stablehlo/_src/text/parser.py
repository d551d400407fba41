"""MLIR text -> IR: operations (generic and pretty), regions, blocks, SSA
values, symbol aliases, resource blocks and the module."""

from __future__ import annotations

import re
from typing import Optional

import support
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import core
from stablehlo._src.ir import types as t
from stablehlo._src.text import attr_parser
from stablehlo._src.text import attr_printer
from stablehlo._src.text import lexer as lx
from stablehlo._src.text import op_defaults
from stablehlo._src.text import type_parser

# Ops whose regions open a new default dialect for un-prefixed op names.
DEFAULT_DIALECT = op_defaults.DEFAULT_DIALECT


# Ops whose regions are isolated from above: values defined outside cannot
# be named inside, and forward references must resolve within the region.
ISOLATED_OPS = frozenset(("builtin.module", "func.func", "vhlo.func_v1",
                          "sdy.manual_computation", "sdy.named_computation"))


# `%name =` with one result: the name (no `#N`, no `:count`, no list).
_ONE_RESULT_RE = re.compile(r"%([A-Za-z0-9_$.\-]+)[ \t\r\n]*=(?!=)")
# The start of an op in custom form, from where the lexer stands: the
# whitespace and comments the lexer would skip, `%name =` as above (or
# nothing), then the op name as the lexer reads an identifier.
# (Skipping is a match of its own: it always succeeds, where a failing
# pattern after a repeated `[ \t\r\n]+` would backtrack exponentially.)
SKIP_RE = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)*")
_SKIP_MATCH = SKIP_RE.match
# A generic op's operand list written plainly (right after the name, one
# space after each comma), and one operand as the lexer reads it.
_OPERAND_RE = re.compile(r"%[A-Za-z0-9_$.\-]+(?:\#[0-9]+)?")
_GENERIC_OPERANDS_RE = re.compile(
    r"\(((?:" + _OPERAND_RE.pattern + r"(?:, " + _OPERAND_RE.pattern +
    r")*)?)\)")
# A block's argument list as printed, with the `:` after it (not `::`).
_BLOCK_ARG_RE = re.compile(
    r"(%[A-Za-z0-9_$.\-]+): (" + type_parser.TENSOR_TYPE_TEXT + ")")
_BLOCK_ARGS_RE = re.compile(
    r"\((?:" + _BLOCK_ARG_RE.pattern + "(?:, " + _BLOCK_ARG_RE.pattern +
    r")*)\):(?!:)")
_OP_HEAD_RE = re.compile(
    r"(?:%([A-Za-z0-9_$.\-]+)(?::([1-9][0-9]*))?[ \t\r\n]*=(?!=)[ \t]*)?"
    r"([A-Za-z_][A-Za-z0-9_$.]*)")


class _Scope:
  __slots__ = ("values", "blocks", "forward_blocks", "isolated")

  def __init__(self, isolated: bool = False):
    self.isolated = isolated
    self.values: dict[str, list[core.Value]] = {}
    self.blocks: dict[str, core.Block] = {}
    self.forward_blocks: dict[str, int] = {}  # label -> first use offset


class Parser(attr_parser.AttrParser):
  """Parses one MLIR source buffer into a `core.Module`."""

  def __init__(self, text: str, filename: str = "<string>",
               line_offset: int = 0):
    super().__init__(text, filename, line_offset)
    self._scopes: list[_Scope] = []
    self._forward_values: dict[str, tuple[core.Value, int]] = {}
    self._ops_with_forward_refs: list[core.Operation] = []
    self._default_dialect: list[str] = [""]
    # Names of the ops being parsed, innermost last (to tell which regions
    # are isolated from above).
    # Names of the ops whose regions are being parsed, innermost last
    # (custom parsers of region ops push theirs too).
    self.op_names: list[str] = []
    self.resources: dict = {}
    self._pending_alias_locs: list = []
    self._loc_prefix = None  # `"file":` of the op locations
    self._loc_cursor = (0, 1, 0)  # (offset, its line, that line's start)

  # --- values ------------------------------------------------------------------

  def parse_value_use_token(self) -> lx.Token:
    return self.expect_kind(lx.PERCENT_ID, "SSA operand")

  def at_value(self) -> bool:
    return self.peek().kind == lx.PERCENT_ID

  def resolve_value(self, tok: lx.Token, ty: t.Type) -> core.Value:
    name, _, idx = tok.text[1:].partition("#")
    index = int(idx) if idx else 0
    for scope in reversed(self._scopes):
      group = scope.values.get(name)
      if group is not None:
        if index >= len(group):
          raise self.error(f"reference to invalid result number", tok.pos)
        value = group[index]
        if value.type != ty:
          raise self.error(
              f"use of value '{tok.text}' expects different type than prior "
              f"uses: '{self.fmt_type(ty)}' vs '{self.fmt_type(value.type)}'",
              tok.pos)
        return value
      if scope.isolated:
        break
    key = tok.text[1:]
    fwd = self._forward_values.get(key)
    if fwd is not None:
      if fwd[0].type != ty:
        raise self.error(f"use of value '{tok.text}' expects different type "
                         "than prior uses", tok.pos)
      return fwd[0]
    placeholder = core.Value(ty, None, index, name)
    self._forward_values[key] = (placeholder, tok.pos)
    return placeholder

  def resolve_values(self, toks, types) -> list[core.Value]:
    if len(toks) != len(types):
      pos = toks[0].pos if toks else None
      raise self.error(f"{len(toks)} operands present, but expected "
                       f"{len(types)}", pos)
    return [self.resolve_value(tok, ty) for tok, ty in zip(toks, types)]

  def fast_values(self, names, types):
    """The values `%a, %b` name with these types when each is defined in
    the innermost scope with that type (no `#N`); else None, so that an op
    fast path leaves the operands to `resolve_values`."""
    if len(names) != len(types):
      return None
    values = self._scopes[-1].values
    out = []
    for name, ty in zip(names, types):
      group = values.get(name[1:])
      if group is None:
        return None
      v = group[0]
      vt = v.type
      if vt is not ty and vt != ty:
        return None
      out.append(v)
    return out

  def define_values(self, name: str, values: list[core.Value], pos: int):
    scope = self._scopes[-1]
    if name in scope.values:
      raise self.error(f"redefinition of SSA value '%{name}'", pos)
    scope.values[name] = values
    for i, v in enumerate(values):
      if not name.isdigit():
        v.name_hint = name
      key = name if len(values) == 1 and i == 0 else f"{name}#{i}"
      for k in ((key, f"{name}#{i}") if i == 0 else (key,)):
        fwd = self._forward_values.pop(k, None)
        if fwd is not None:
          self._replace_forward(fwd[0], v, pos)

  def _replace_forward(self, old, new, pos):
    if old.type != new.type:
      raise self.error("definition of SSA value has a different type than "
                       "its prior uses", pos)
    for op in self._ops_with_forward_refs:
      op.operands = [new if v is old else v for v in op.operands]

  def fmt_type(self, ty) -> str:
    return attr_printer.format_type(ty)

  # --- operations --------------------------------------------------------------

  def parse_operation(self) -> core.Operation:
    self.enter()
    try:
      return self._parse_operation()
    finally:
      self.leave()

  def _parse_operation(self, pos: int = -1) -> core.Operation:
    """The op at the lexer; `pos`, when given, is where its first token
    starts (the lexer has nothing peeked and would skip to there)."""
    lex = self.lex
    tok = lex.peeked
    if tok is None:
      # `%name = dialect.op` or `dialect.op` (most ops) in one match, in
      # place of a token for the name, a match for `%name =` and a token
      # for the op name.
      text = self.text
      if pos < 0:
        pos = _SKIP_MATCH(text, lex.pos).end()
      m = _OP_HEAD_RE.match(text, pos)
      if m is not None:
        name_pos = m.start(3)
        lex.pos = m.end()
        line, col = self._line_col(name_pos)
        result_name = m.group(1)
        count = 1 if m.group(2) is None else int(m.group(2))
        op = self._parse_custom_operation(
            None if result_name is None else count, m.group(3), name_pos)
        if result_name is None:
          return self._finish_operation(op, None, None, name_pos, line, col)
        if count != 1:
          return self._finish_operation(op, ((result_name, count, pos),),
                                        count, pos, line, col)
        return self._finish_one_result(op, result_name, pos, line, col)
      tok = lex.peek()
    defs = None  # [(name, count, pos)]
    num_results = None
    start = tok.pos
    if tok.kind == lx.PERCENT_ID:
      # `%name = ` (one name, one result) is most ops: one match.
      m = _ONE_RESULT_RE.match(self.text, start)
      if m is not None:
        defs = ((m.group(1), 1, start),)
        num_results = 1
        lex.reset(m.end())
      else:
        defs = self._parse_result_names()
        num_results = sum(c for _, c, _ in defs)
      tok = lex.peek()
    name_pos = tok.pos
    # The line and column of the name are counted now, while ops still come
    # in text order (after the op's regions the count would go back).
    line, col = self._line_col(name_pos)
    if tok.kind == lx.STRING:
      op = self.parse_generic_operation()
    elif tok.kind == lx.BARE_ID:
      self.next()
      op = self._parse_custom_operation(num_results, tok.text, name_pos)
    else:
      raise self.error("expected operation name in quotes", tok.pos)
    return self._finish_operation(op, defs, num_results, start, line, col)

  def _finish_one_result(self, op, name, start, line, col):
    """`_finish_operation` of an op written `%name = ...`, where it has one
    result, no loc(...) follows and no value awaits a definition: its
    location and result name, in place of the general steps."""
    lex = self.lex
    text = self.text
    results = op.results
    if (lex.peeked is not None or len(results) != 1 or self._forward_values
        or text.startswith("loc", _SKIP_MATCH(text, lex.pos).end())):
      return self._finish_operation(op, ((name, 1, start),), 1, start, line,
                                    col)
    op.location = self._file_location(line, col)
    for v in op.operands:
      if v.owner is None:
        self._ops_with_forward_refs.append(op)
        break
    values = self._scopes[-1].values
    if name in values:
      raise self.error(f"redefinition of SSA value '%{name}'", start)
    values[name] = results
    if not name.isdigit():
      results[0].name_hint = name
    return op

  def _finish_operation(self, op, defs, num_results, start, line, col):
    """After the op itself: its location, result names, forward uses."""
    loc = self.parse_optional_location()
    # As in MLIR, an op without an explicit loc(...) is located where its
    # name appears in the source, so verifier errors can point at it.
    op.location = loc if loc is not None else self._file_location(line, col)
    results = op.results
    if defs is not None and num_results != len(results):
      raise self.error(f"operation defines {len(results)} results but was "
                       f"provided {num_results} to bind", start)
    for v in op.operands:
      if v.owner is None:
        self._ops_with_forward_refs.append(op)
        break
    if defs is not None:
      i = 0
      for name, count, pos in defs:
        self.define_values(name, results[i:i + count], pos)
        i += count
    return op

  def _parse_result_names(self) -> list:
    """`%a, %b:2 =` before an op: [(name, result count, offset)]."""
    defs = []
    while True:
      tok = self.expect_kind(lx.PERCENT_ID, "SSA value name")
      if "#" in tok.text:
        raise self.error("expected SSA value name without result number",
                         tok.pos)
      count = 1
      if self.at_punct(":"):
        self.next()
        ctok = self.expect_kind(lx.INTEGER, "number of results")
        count = lx.int_value(ctok.text)
        if count < 1:
          raise self.error("expected named operation to have at least 1 "
                           "result", ctok.pos)
      defs.append((tok.text[1:], count, tok.pos))
      if not self.consume_punct(","):
        break
    self.expect_punct("=", "after SSA names")
    return defs

  def _parse_custom_operation(self, num_results, name: str, pos: int,
                              fast_tried: bool = False) -> core.Operation:
    """The op whose name `name` (at offset `pos`) was just read;
    `fast_tried`: its form's fast path already returned None."""
    form = (_FORMS or _pretty_forms()).get(name)
    if form is None:
      name, form = self._resolve_op_name(name, pos)
      fast_tried = False
    fast = form.fast
    if fast is not None and not fast_tried:
      op = fast(self, name, self.lex.pos)
      if op is not None:
        return op
    self.op_names.append(name)
    try:
      return form.parse(self, name, pos)
    finally:
      self.op_names.pop()

  def _resolve_op_name(self, name: str, pos: int):
    """(full name, form) of an op name without its dialect (`return`):
    the enclosing default dialect's op, else builtin's."""
    dd = self._default_dialect[-1]
    hit = _RESOLVED_NAMES.get((dd, name))
    if hit is not None:
      return hit
    forms = _pretty_forms()
    if "." not in name:
      for candidate in ((f"{dd}.{name}",) if dd else ()) + (
          f"builtin.{name}",):
        form = forms.get(candidate)
        if form is not None:
          _RESOLVED_NAMES[(dd, name)] = (candidate, form)
          return candidate, form
    raise self.error(f"custom op '{name}' is unknown", pos)

  def parse_generic_operation(self) -> core.Operation:
    name_tok = self.next()
    name = lx.unescape_string(name_tok.text[1:-1])
    if not name:
      raise self.error("empty operation name is invalid", name_tok.pos)
    m = None
    if self.lex.peeked is None:
      # `(%a, %b#1)` written plainly: one match, not two tokens an operand.
      m = _GENERIC_OPERANDS_RE.match(self.text, self.lex.pos)
    if m is not None:
      operand_toks = [lx.Token(lx.PERCENT_ID, o.group(), o.start())
                      for o in _OPERAND_RE.finditer(self.text, *m.span(1))]
      self.lex.reset(m.end())
    else:
      self.expect_punct("(", "to start operand list")
      operand_toks = self.parse_comma_list(self.parse_value_use_token, ")")
      self.expect_punct(")", "to end operand list")
    successors = []
    if self.at_punct("["):
      successors = self.parse_delimited("[", "]", self.parse_successor)
    properties = {}
    if self.at_punct("<"):
      self.next()
      properties = dict(self.parse_attr_dict().entries)
      self.expect_punct(">", "after properties")
    regions = []
    if self.at_punct("("):
      self.next()
      self._default_dialect.append(DEFAULT_DIALECT.get(name, ""))
      self.op_names.append(name)
      try:
        regions = self.parse_comma_list(self.parse_region)
      finally:
        self.op_names.pop()
        self._default_dialect.pop()
      self.expect_punct(")", "to end region list")
    attributes = {}
    if self.at_punct("{"):
      attributes = dict(self.parse_attr_dict().entries)
    tpos = self.lex.token_start()
    self.expect_punct(":", "followed by operation type")
    fn = self.parse_type()
    if not isinstance(fn, t.FunctionType):
      raise self.error("expected function type", tpos)
    operands = self.resolve_values(operand_toks, fn.inputs)
    return core.Operation(name, operands, fn.results, attributes, properties,
                          regions, successors)

  def parse_successor(self) -> core.Block:
    tok = self.expect_kind(lx.CARET_ID, "block successor")
    label = tok.text[1:]
    scope = self._region_scope()
    block = scope.blocks.get(label)
    if block is None:
      block = core.Block(label=label)
      scope.blocks[label] = block
      scope.forward_blocks[label] = tok.pos
    return block

  def _region_scope(self) -> _Scope:
    if not self._scopes:
      raise self.error("block reference outside of a region")
    return self._scopes[-1]

  # --- regions -------------------------------------------------------------------

  def parse_region(self, entry_args=None, default_dialect: Optional[str] = None
                   ) -> core.Region:
    """`{ ops }` / `{ ^bb0(...): ops ^bb1: ... }`.

    `entry_args`: [(name_token, type, loc)] the op's syntax already declared
    for the entry block (func arguments, while iteration values).
    """
    self.enter()
    if default_dialect is not None:
      self._default_dialect.append(default_dialect)
    isolated = bool(self.op_names) and self.op_names[-1] in ISOLATED_OPS
    self._scopes.append(_Scope(isolated))
    outer_forward = self._forward_values
    if isolated:
      self._forward_values = {}
    try:
      region = self._parse_region_body(entry_args)
      if isolated:
        self._check_no_forward_values()
      return region
    finally:
      self._scopes.pop()
      self._forward_values = outer_forward
      if default_dialect is not None:
        self._default_dialect.pop()
      self.leave()

  def _at_op_start(self) -> bool:
    """Whether nothing is peeked and the next token starts with neither
    '}' nor '^': it neither ends a region nor labels a block, so an op (or
    an error) starts there. Told by a character, leaving the token unread
    for the op head's one match."""
    lex = self.lex
    if lex.peeked is not None:
      return False
    text = self.text
    pos = _SKIP_MATCH(text, lex.pos).end()
    return pos < len(text) and text[pos] not in "}^"

  def _parse_region_body(self, entry_args) -> core.Region:
    region = core.Region()
    lex = self.lex
    text = self.text
    pos = _SKIP_MATCH(text, lex.pos).end() if lex.peeked is None else -1
    if (pos >= 0 and text.startswith("{", pos) and
        not text.startswith("{-#", pos)):
      lex.pos = pos + 1  # the `{` token, by a character
    else:
      self.expect_punct("{", "to begin a region")
    scope = self._scopes[-1]
    if entry_args is not None:
      block = core.Block()
      for tok, ty, loc in entry_args:
        v = block.add_argument(ty, loc=loc)
        self.define_values(tok.text[1:], [v], tok.pos)
      region.append(block)
      if not self._at_op_start():
        if self.at_punct("}") and not entry_args:
          self.next()
          return region
        if self.peek().kind == lx.CARET_ID:
          raise self.error(
              "invalid block name in region with named arguments")
      self._parse_block_ops(block)
    elif self._at_op_start():
      block = core.Block()
      region.append(block)
      self._parse_block_ops(block)
    elif self.at_punct("}"):
      self.next()
      return region
    elif self.peek().kind != lx.CARET_ID:
      block = core.Block()
      region.append(block)
      self._parse_block_ops(block)
    while True:
      if lex.peeked is None:
        pos = _SKIP_MATCH(text, lex.pos).end()
        if text.startswith("}", pos):
          lex.pos = pos + 1  # the `}` token, by a character
          break
      if self.peek().kind != lx.CARET_ID:
        self.expect_punct("}", "to end region")
        break
      region.append(self._parse_labeled_block(scope))
    for label, pos in scope.forward_blocks.items():
      if label not in scope.blocks or scope.blocks[label].parent is None:
        raise self.error(f"reference to an undefined block", pos)
    return region

  def _check_no_forward_values(self) -> None:
    for key, (_, pos) in self._forward_values.items():
      raise self.error(f"use of undeclared SSA value name '%{key}'", pos)

  def _parse_labeled_block(self, scope: _Scope) -> core.Block:
    tok = self.next()
    label = tok.text[1:]
    block = scope.blocks.get(label)
    if block is not None and block.parent is not None:
      raise self.error(f"redefinition of block '^{label}'", tok.pos)
    if block is None:
      block = core.Block(label=label)
      scope.blocks[label] = block
    scope.forward_blocks.pop(label, None)
    block.label = label
    args = None
    if self.lex.peeked is None:
      # `(%a: tensor<...>, %b: tensor<...>):` as printed, in one match, the
      # types from the type cache; anything else by tokens.
      m = _BLOCK_ARGS_RE.match(self.text, self.lex.pos)
      if m is not None:
        args = []
        for item in _BLOCK_ARG_RE.finditer(self.text, m.start(), m.end()):
          ty = type_parser.cached_type(item.group(2))
          if ty is None:
            args = None
            break
          args.append((item.group(1)[1:], item.start(), ty))
    if args is not None:
      self.lex.reset(m.end())
      for arg_name, arg_pos, ty in args:
        self.define_values(arg_name, [block.add_argument(ty)], arg_pos)
    elif self.consume_punct("("):
      def arg():
        vtok = self.expect_kind(lx.PERCENT_ID, "block argument name")
        self.expect_punct(":", "and type for block argument")
        ty = self.parse_type()
        loc = self.parse_optional_location()
        v = block.add_argument(ty, loc=loc)
        self.define_values(vtok.text[1:], [v], vtok.pos)
      self.parse_comma_list(arg, ")")
      self.expect_punct(")", "to end block argument list")
    if args is None:
      self.expect_punct(":", "after block name")
    scope.blocks[label] = block
    block.parent = core.Region()  # marks the block defined; reset by append
    self._parse_block_ops(block)
    return block

  def _parse_block_ops(self, block: core.Block) -> None:
    lex = self.lex
    text = self.text
    ops = block.operations
    forms = _FORMS or _pretty_forms()
    line_offset = self.source.line_offset
    # Where the skip after the previous op started and ended: the next
    # op's skip, unless the lexer moved since.
    skip_from = skip_to = -1
    while True:
      if lex.peeked is None:
        # The op head (`%name = dialect.op` or `dialect.op`) in one match
        # after the skip; it fails at `}` (the region's end: returned at
        # once, the brace left for _parse_region_body to take by a
        # character), `^label` and the end of the text, which the token
        # path below handles. What follows is
        # _parse_operation's head path, _line_col and the fast-path case of
        # _finish_one_result, inlined: this runs once per op.
        pos = (skip_to if lex.pos == skip_from else
               _SKIP_MATCH(text, lex.pos).end())
        m = _OP_HEAD_RE.match(text, pos)
        if m is not None:
          self._depth += 1
          if self._depth > type_parser.MAX_NESTING:
            raise self.error("nesting is too deep")
          try:
            name = m.group(3)
            name_pos = m.start(3)
            lex.pos = m.end()
            last_pos, line, line_start = self._loc_cursor
            if name_pos >= last_pos:
              newlines = text.count("\n", last_pos, name_pos)
              if newlines:
                line += newlines
                line_start = text.rfind("\n", last_pos, name_pos) + 1
              self._loc_cursor = (name_pos, line, line_start)
              col = name_pos - line_start + 1
              line += line_offset
            else:
              line, col = self.source.line_col(name_pos)
            result_name = m.group(1)
            count = 1 if m.group(2) is None else int(m.group(2))
            op = None
            form = forms.get(name)
            if form is not None and form.fast is not None:
              op = form.fast(self, name, lex.pos)
            if op is None:
              op = self._parse_custom_operation(
                  None if result_name is None else count, name, name_pos,
                  form is not None)
            results = op.results
            after = -1
            if lex.peeked is None:
              after = _SKIP_MATCH(text, lex.pos).end()
              if text.startswith("loc", after):
                after = -1
            if after < 0 or (result_name is not None and (
                count != 1 or len(results) != 1 or self._forward_values)):
              if result_name is None:
                op = self._finish_operation(op, None, None, name_pos, line,
                                            col)
              else:
                op = self._finish_operation(op, ((result_name, count, pos),),
                                            count, pos, line, col)
            else:
              op.location = a.file_location(
                  self.source.filename, line, col,
                  f"{self._loc_prefix or self._make_loc_prefix()}"
                  f"{line}:{col}")
              for v in op.operands:
                if v.owner is None:
                  self._ops_with_forward_refs.append(op)
                  break
              if result_name is not None:
                values = self._scopes[-1].values
                if result_name in values:
                  raise self.error(
                      f"redefinition of SSA value '%{result_name}'", pos)
                values[result_name] = results
                if not result_name.isdigit():
                  results[0].name_hint = result_name
              skip_from = lex.pos
              skip_to = after
          finally:
            self._depth -= 1
          op.parent = block
          ops.append(op)
          continue
        if text.startswith("}", pos):
          return  # the region's end, left unread for _parse_region_body
      tok = lex.peek()
      if tok.kind == lx.CARET_ID or (tok.kind == lx.PUNCT and
                                     tok.text == "}"):
        return
      if tok.kind == lx.EOF:
        raise self.error("expected '}' to end region", tok.pos)
      self._depth += 1
      if self._depth > type_parser.MAX_NESTING:
        raise self.error("nesting is too deep")
      try:
        op = self._parse_operation()
      finally:
        self._depth -= 1
      op.parent = block
      ops.append(op)

  # --- top level -------------------------------------------------------------------

  def parse_top_level(self) -> core.Module:
    ops = []
    self._scopes.append(_Scope())
    self._default_dialect.append("builtin")
    lex = self.lex
    text = self.text
    while True:
      if lex.peeked is None:
        # The end of the text, or an op (anything but an alias or resource
        # definition), told by a character after the skip.
        pos = _SKIP_MATCH(text, lex.pos).end()
        if pos >= len(text):
          break
        if text[pos] not in "#!{":
          self.enter()
          try:
            ops.append(self._parse_operation(pos))
          finally:
            self.leave()
          continue
      tok = self.peek()
      if tok.kind == lx.EOF:
        break
      if tok.kind == lx.HASH_ID and self._at_alias_def():
        self._parse_attr_alias()
      elif tok.kind == lx.BANG_ID and self._at_alias_def():
        self._parse_type_alias()
      elif tok.kind == lx.PUNCT and tok.text == "{-#":
        self._parse_resources()
      else:
        ops.append(self.parse_operation())
    self._check_no_forward_values()
    if len(ops) == 1 and ops[0].name == "builtin.module":
      module_op = ops[0]
      if len(module_op.regions) != 1:
        raise self.error("'builtin.module' needs exactly one region", 0)
      if not module_op.regions[0].blocks:
        module_op.regions[0].append(core.Block())
    else:
      block = core.Block()
      for op in ops:
        block.append(op)
      module_op = core.Operation("builtin.module", regions=[
          core.Region([block])])
    module = core.Module(module_op, resources=self.resources,
                         attribute_aliases=dict(self.attr_aliases),
                         type_aliases=dict(self.type_aliases),
                         location_aliases=dict(self.loc_aliases))
    if self.uses_loc_aliases:
      self._resolve_loc_aliases(module)
    return module

  def _at_alias_def(self) -> bool:
    save = self.lex.token_start()
    self.next()
    is_def = self.at_punct("=")
    self.lex.reset(save)
    return is_def

  def _parse_attr_alias(self):
    tok = self.next()
    name = tok.text[1:]
    self.expect_punct("=")
    if name in self.attr_aliases or name in self.loc_aliases:
      raise self.error(f"redefinition of attribute alias id '{name}'", tok.pos)
    if self.at_keyword("loc"):
      loc = self.parse_optional_location()
      self.loc_aliases[name] = loc
      return
    self.attr_aliases[name] = self.parse_attribute()

  def _parse_type_alias(self):
    tok = self.next()
    name = tok.text[1:]
    self.expect_punct("=")
    if name in self.type_aliases:
      raise self.error(f"redefinition of type alias id '{name}'", tok.pos)
    self.type_aliases[name] = self.parse_type()

  def _parse_resources(self):
    self.expect_punct("{-#")
    while True:
      section = self.expect_bare_id("resource section name")
      self.expect_punct(":")
      self.expect_punct("{")
      def group():
        dialect = self.expect_bare_id("dialect name")
        self.expect_punct(":")
        self.expect_punct("{")
        def entry():
          tok = self.next()
          if tok.kind not in (lx.BARE_ID, lx.STRING):
            raise self.error("expected resource key", tok.pos)
          key = tok.text
          self.expect_punct(":")
          vtok = self.next()
          if vtok.kind not in (lx.STRING, lx.BARE_ID, lx.INTEGER):
            raise self.error("expected resource value", vtok.pos)
          self.resources.setdefault(section, {}).setdefault(
              dialect, {})[key] = vtok.text
        self.parse_comma_list(entry, "}")
        self.expect_punct("}")
      self.parse_comma_list(group, "}")
      self.expect_punct("}")
      if not self.consume_punct(","):
        break
    self.expect_punct("#-}", "to end resource block")

  def _source_location(self, pos: int) -> a.Location:
    return self._file_location(*self._line_col(pos))

  def _line_col(self, pos: int) -> tuple[int, int]:
    # Ops come in text order: count the newlines since the previous op's
    # name rather than searching a table of line starts.
    last_pos, line, line_start = self._loc_cursor
    if pos >= last_pos:
      text = self.text
      newlines = text.count("\n", last_pos, pos)
      if newlines:
        line += newlines
        line_start = text.rfind("\n", last_pos, pos) + 1
      self._loc_cursor = (pos, line, line_start)
      return line + self.source.line_offset, pos - line_start + 1
    return self.source.line_col(pos)

  def _file_location(self, line: int, col: int) -> a.Location:
    prefix = self._loc_prefix or self._make_loc_prefix()
    return a.file_location(self.source.filename, line, col,
                           f"{prefix}{line}:{col}")

  def _make_loc_prefix(self) -> str:
    """`"file":`, the start of the text of this buffer's op locations."""
    quoted = self.source.filename.replace("\\", "\\\\").replace(
        '"', '\\"')
    self._loc_prefix = f'"{quoted}":'
    return self._loc_prefix

  def _resolve_loc_aliases(self, module):
    def resolve(loc, depth=0):
      if loc is not None and loc.kind == "alias" and depth < 50:
        target = self.loc_aliases.get(loc.text[1:])
        if target is None:
          raise self.error(f"undefined location alias '{loc.text}'", 0)
        return resolve(target, depth + 1)
      return loc
    for op in module.walk():
      op.location = resolve(op.location) or a.UNKNOWN_LOC
      for region in op.regions:
        for block in region.blocks:
          block.argument_locations = [resolve(l) for l in
                                      block.argument_locations]


_FORMS = None
# (default dialect, op name without dialect) -> (full name, pretty form).
_RESOLVED_NAMES: dict = {}


def _pretty_forms() -> dict:
  """The pretty-form table (imported on first use: pretty_ops imports this
  module's helpers)."""
  global _FORMS
  if _FORMS is None:
    from stablehlo._src.text import pretty_ops  # pylint: disable=g-import-not-at-top
    _FORMS = pretty_ops.PRETTY_FORMS
  return _FORMS


def parse_module(text: str, filename: str = "<string>",
                 line_offset: int = 0) -> core.Module:
  """Parses MLIR text into a Module; raises `diagnostics.ParseError`."""
  parser = Parser(text, filename, line_offset)
  try:
    # The objects a parse makes live until it ends; collections meanwhile
    # would walk the caller's heap for nothing (support.heap).
    with support.heap.gc_paused():
      return parser.parse_top_level()
  except RecursionError:
    raise parser.error("nesting is too deep")
