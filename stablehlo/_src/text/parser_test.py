"""Parser tests: structure, attributes, dense values and diagnostics."""

import numpy as np
import pytest

import support
from stablehlo._src import text
from stablehlo._src.ir import attributes as a
from stablehlo._src.ir import types as t


def _only_func(module):
  funcs = module.functions
  assert len(funcs) == 1
  return funcs[0]


def _ops(module):
  return [op for op in module.walk()]


def test_generic_form_with_properties_regions_and_multi_results():
  m = text.parse_module('''
  func.func @f(%arg0: tensor<4xf32>, %arg1: tensor<f32>) -> tensor<f32> {
    %r:2 = "stablehlo.reduce"(%arg0, %arg1) <{dimensions = array<i64: 0>}> ({
    ^bb0(%x: tensor<f32>, %y: tensor<f32>):
      %s = stablehlo.add %x, %y : tensor<f32>
      "stablehlo.return"(%s) : (tensor<f32>) -> ()
    }) {foo = "bar"} : (tensor<4xf32>, tensor<f32>) -> (tensor<f32>, tensor<f32>)
    func.return %r#1 : tensor<f32>
  }''')
  f = _only_func(m)
  reduce_op, ret = f.regions[0].entry.operations
  assert reduce_op.name == "stablehlo.reduce"
  assert reduce_op.properties["dimensions"] == a.DenseArrayAttr(t.i64, (0,))
  assert reduce_op.attributes["foo"] == a.StringAttr("bar")
  assert len(reduce_op.results) == 2
  assert ret.operands[0] is reduce_op.results[1]
  block = reduce_op.regions[0].entry
  assert [v.type for v in block.arguments] == [
      t.RankedTensorType((), t.f32)] * 2


def test_func_signature_attrs_and_visibility():
  m = text.parse_module('''
  module @jit_main attributes {mhlo.num_partitions = 1 : i32} {
    func.func private @g(%arg0: tensor<2xi8> {a.b = 1 : i64}) -> (tensor<2xi8> {jax.result_info = ""}) {
      return %arg0 : tensor<2xi8>
    }
    func.func private @decl(tensor<f32>)
  }''')
  assert m.op.attr("sym_name") == a.StringAttr("jit_main")
  g, decl = m.functions
  assert g.attr("sym_visibility") == a.StringAttr("private")
  assert g.attr("arg_attrs").elements[0].get("a.b") == a.IntegerAttr(1)
  assert g.regions[0].entry.operations[0].name == "func.return"
  assert not decl.regions[0].blocks


def test_quantized_tensor_types_are_cached_but_not_past_aliases():
  src = """func.func @f(%a: tensor<2x!quant.uniform<i8<-127:127>:f32, 0.5:3>>) -> tensor<2x!quant.uniform<i8<-127:127>:f32, 0.5:3>> {
  return %a : tensor<2x!quant.uniform<i8<-127:127>:f32, 0.5:3>>
}"""
  for _ in range(2):
    ty = _only_func(text.parse_module(src)).regions[0].entry.arguments[0].type
    assert ty.shape == (2,)
    q = ty.element_type
    assert isinstance(q, t.QuantizedType)
    assert (q.scales, q.zero_points, q.storage_min, q.storage_max) == (
        (0.5,), (3,), -127, 127)
  # A module whose own alias is named quant.uniform reads the text anew
  # (here: an error, as the alias is not a quantized type).
  with pytest.raises(text.ParseError):
    text.parse_module("!quant.uniform = f32\n" + src)


def test_generic_ops_and_block_arguments_read_in_one_match():
  # Plain operand lists and block argument lists are read by one match
  # each (block argument types from the type cache, so the first parse
  # reads them by tokens); locations and other spellings by tokens.
  src = """func.func @f(%a: tensor<2xi32>, %i: tensor<1xi64>) -> tensor<2xi32> {
  %0:2 = "t.pair"(%a) : (tensor<2xi32>) -> (tensor<2xi32>, tensor<2xi32>)
  %1 = "stablehlo.scatter"(%0#0, %i, %0#1) <{indices_are_sorted = true}> ({
  ^bb0(%x: tensor<i32>, %y: tensor<i32> loc("y")):
    %2 = stablehlo.add %x, %y : tensor<i32>
    stablehlo.return %2 : tensor<i32>
  }) : (tensor<2xi32>, tensor<1xi64>, tensor<2xi32>) -> tensor<2xi32>
  %3 = "stablehlo.scatter"(%1, %i, %a) ({
  ^bb0(%x: tensor<i32>, %y: tensor<i32>):
    stablehlo.return %y : tensor<i32>
  }) : (tensor<2xi32>, tensor<1xi64>, tensor<2xi32>) -> tensor<2xi32>
  return %3 : tensor<2xi32>
}"""
  for _ in range(2):
    body = _only_func(text.parse_module(src)).regions[0].entry
    pair, s1, s2, _ = body.operations
    assert s1.operands == [pair.results[0], body.arguments[1],
                           pair.results[1]]
    assert s2.operands == [s1.results[0], body.arguments[1],
                           body.arguments[0]]
    for op in (s1, s2):
      block = op.regions[0].blocks[0]
      assert block.label == "bb0"
      assert [v.type for v in block.arguments] == [
          t.RankedTensorType((), t.i32)] * 2
      assert [v.name_hint for v in block.arguments] == ["x", "y"]
    add = s1.regions[0].blocks[0].operations[0]
    assert add.operands == s1.regions[0].blocks[0].arguments
    assert s2.regions[0].blocks[0].operations[0].operands == [
        s2.regions[0].blocks[0].arguments[1]]
    assert s1.regions[0].blocks[0].argument_locations[1].kind == "name"
    assert s2.regions[0].blocks[0].argument_locations == [None, None]
  bad = src.replace("^bb0(%x: tensor<i32>, %y: tensor<i32>):",
                    "^bb0(%x: tensor<i32>, %x: tensor<i32>):")
  for _ in range(2):
    with pytest.raises(text.ParseError) as e:
      text.parse_module(bad, "g.mlir")
    assert str(e.value).startswith("g.mlir:9:25: error: redefinition")


def test_functions_sharing_a_signature():
  # Headers with the same arguments, results and attributes share their
  # parsed signature; names, visibility and argument positions are each
  # function's own.
  head = ('(%x: tensor<2xf32> {a.b = 1 : i64}, %y: tensor<2xf32>) -> '
          '(tensor<2xf32> {r = "s"})')
  src = f"""module {{
  func.func @one{head} {{
    return %x : tensor<2xf32>
  }}
  func.func private @two{head} {{
    return %y : tensor<2xf32>
  }}
}}"""
  for _ in range(2):
    one, two = text.parse_module(src).functions
    assert list(one.properties) == ["sym_name", "function_type", "arg_attrs",
                                    "res_attrs"]
    assert list(two.properties) == ["sym_name", "function_type",
                                    "sym_visibility", "arg_attrs",
                                    "res_attrs"]
    assert one.attr("sym_name") == a.StringAttr("one")
    assert two.attr("sym_name") == a.StringAttr("two")
    assert one.attr("function_type") == two.attr("function_type")
    assert two.attr("arg_attrs").elements[0].get("a.b") == a.IntegerAttr(1)
    for func, arg in ((one, 0), (two, 1)):
      ret = func.regions[0].entry.operations[0]
      assert ret.operands == [func.regions[0].entry.arguments[arg]]
  bad = src.replace("@two(%x: tensor<2xf32> {a.b = 1 : i64}, %y",
                    "@two(%x: tensor<2xf32> {a.b = 1 : i64}, %x")
  bad = bad.replace("@one(%x: tensor<2xf32> {a.b = 1 : i64}, %y",
                    "@one(%x: tensor<2xf32> {a.b = 1 : i64}, %x")
  for _ in range(2):
    with pytest.raises(text.ParseError) as e:
      text.parse_module(bad, "f.mlir")
    assert str(e.value).startswith("f.mlir:2:53: error: redefinition")


def test_types():
  m = text.parse_module('''
  func.func @f(%a: tensor<?x3x!quant.uniform<i8:f32, 0.5:-20>>,
               %b: tensor<2x!quant.uniform<i8:f32:0, {0.1:-30,0.5:-20}>>,
               %c: !stablehlo.token, %d: tuple<tensor<i1>, tensor<ui4>>,
               %e: tensor<3xcomplex<f64>>, %g: tensor<?xf32, #stablehlo.bounds<4>>,
               %h: tensor<f8E4M3FN>, %i: tensor<*xf32>)''')
  ins = _only_func(m).attr("function_type").value.inputs
  q = ins[0].element_type
  assert ins[0].shape == (None, 3)
  assert (q.scales, q.zero_points, q.quantized_dimension) == ((0.5,), (-20,),
                                                               None)
  assert ins[1].element_type.quantized_dimension == 0
  assert ins[1].element_type.zero_points == (-30, -20)
  assert ins[2] == t.TokenType()
  assert ins[3] == t.TupleType((t.RankedTensorType((), t.i1),
                                t.RankedTensorType((), t.IntegerType(4, True))))
  assert ins[4].element_type == t.ComplexType(t.f64)
  assert ins[5].encoding.name == "stablehlo.bounds"
  assert ins[6].element_type == t.FloatType("f8E4M3FN")
  assert ins[7] == t.UnrankedTensorType(t.f32)


def _constant(literal):
  m = text.parse_module(f"%0 = stablehlo.constant {literal}")
  return m.body.operations[0].attr("value")


def test_dense_values():
  assert _constant("dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>").array.tolist(
  ) == [[1, 2], [3, 4]]
  splat = _constant("dense<0x7FC00000> : tensor<2xf32>")
  assert np.isnan(splat.array).all() and splat.splat
  hexb = _constant('dense<"0x0000803F00000040"> : tensor<2xf32>')
  assert hexb.array.tolist() == [1.0, 2.0]
  b = _constant('dense<"0x0100"> : tensor<2xi1>')
  assert b.array.tolist() == [True, False]
  c = _constant("dense<[(1.0, 2.0), (3.0, -4.0)]> : tensor<2xcomplex<f32>>")
  assert c.array.tolist() == [1 + 2j, 3 - 4j]
  u = _constant("dense<[-1, 7]> : tensor<2xi4>")
  assert u.array.astype(int).tolist() == [-1, 7]
  e = _constant("dense<> : tensor<0xf32>")
  assert e.array.shape == (0,)
  bf = _constant("dense<[1.5, 0xFF80]> : tensor<2xbf16>")
  assert float(bf.array[1]) == float("-inf")


def test_aliases_and_locations():
  m = text.parse_module('''
  #map = #stablehlo<comparison_direction EQ>
  !T = tensor<2xf32>
  func.func @f(%a: !T loc("x.py":3:4)) -> tensor<2xi1> {
    %0 = stablehlo.compare EQ, %a, %a : (!T, !T) -> tensor<2xi1> loc(#loc1)
    func.return %0 : tensor<2xi1> loc(unknown)
  }
  #loc1 = loc("a.py":10:2)''')
  f = _only_func(m)
  cmp = f.regions[0].entry.operations[0]
  assert cmp.location.kind == "file" and cmp.location.line == 10
  assert f.regions[0].entry.argument_locations[0].filename == "x.py"
  assert m.attribute_aliases["map"].params == (("value", "EQ"),)


def test_dialect_attributes_are_structured():
  m = text.parse_module('''
  %0 = "test.op"() {g = #stablehlo.gather<offset_dims = [1], index_vector_dim = 1>,
    c = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>,
    r = #stablehlo.result_accuracy<atol = 0.000000e+00, ulps = 1, mode = #stablehlo.result_accuracy_mode<DEFAULT>>,
    o = #sparse_tensor.encoding<{ map = (d0) -> (d0 : compressed) }>} : () -> i32''')
  op = m.body.operations[0]
  assert op.attr("g").get("offset_dims") == (1,)
  conv = op.attr("c")
  assert conv.get("input_spatial_dimensions") == (1, 2)
  assert conv.get("kernel_output_feature_dimension") == 3
  assert op.attr("r").get("mode").params == (("value", "DEFAULT"),)
  assert isinstance(op.attr("o"), a.OpaqueAttr)


def test_split_input_file_keeps_line_numbers():
  src = "func.func @a() {\n  func.return\n}\n// -----\nfunc.func @b() {\n  %x = \n}\n"
  cases = text.split_input_file(src)
  assert [c.first_line for c in cases] == [0, 4]
  text.parse_module(cases[0].text)
  with pytest.raises(text.ParseError) as e:
    text.parse_module(cases[1].text, "in.mlir", cases[1].first_line)
  assert str(e.value).startswith("in.mlir:7:1: error:")


@pytest.mark.parametrize("src,position,what", [
    ("%0 = stablehlo.add %a, %b : tensor<f32>", "1:20",
     "use of undeclared SSA value name"),
    ('"foo.bar"(%x) : () -> ()', "1:11", "1 operands present, but expected 0"),
    ("func.func @f() {\n  %0 = stablehlo.bogus : tensor<f32>\n}", "2:8",
     "custom op 'stablehlo.bogus' is unknown"),
    ("%0 = stablehlo.constant dense<[1, 2]> : tensor<3xi32>", "1:39",
     "inferred shape of elements literal ([2]) does not match type ([3])"),
    ("%0 = stablehlo.constant dense<300> : tensor<i8>", "1:31",
     "integer constant out of range for type"),
    ("func.func @f(%a: tensor<f32>) {\n  %0 = stablehlo.add %a, %a : tensor<i32>\n}",
     "2:22", "use of value '%a' expects different type than prior uses"),
    ("%0 = stablehlo.constant dense<1> : tensor<2xf33>", "1:45",
     "unknown type 'f33'"),
    ("func.func @f() {", "1:17", "expected '}' to end region"),
    # A function body cannot name a value of a later function: func.func is
    # isolated from above (found by the mutation fuzzer).
    ("func.func @a() -> tensor<i32> {\n  return %t : tensor<i32>\n}\n"
     "func.func @b(%t: tensor<i32>) -> tensor<i32> {\n"
     "  return %t : tensor<i32>\n}", "2:10",
     "use of undeclared SSA value name '%t'"),
    ('func.func @a(%x: tensor<i32>) {\n  "func.func"() ({\n'
     '    "t.use"(%x) : (tensor<i32>) -> ()\n  }) : () -> ()\n  return\n}',
     "3:13", "use of undeclared SSA value name '%x'"),
])
def test_diagnostics(src, position, what):
  with pytest.raises(text.ParseError) as e:
    text.parse_module(src, "t.mlir")
  message = str(e.value)
  first, line, caret = message.split("\n")
  assert first.startswith(f"t.mlir:{position}: error: {what}"), first
  col = int(position.split(":")[1])
  assert caret == " " * (col - 1) + "^"
  assert isinstance(e.value, support.InvalidArgumentError)


def test_deep_nesting_is_a_parse_error():
  src = "%0 = \"t.op\"() {a = " + "[" * 5000 + "]" * 5000 + "} : () -> ()"
  with pytest.raises(text.ParseError, match="nesting is too deep"):
    text.parse_module(src)


# --- fast paths (one regex / json / a cache) agree with the token path ---------


@pytest.mark.parametrize("src, position, what", [
    # A JSON-readable literal whose element is out of range, a float in an
    # integer type, or a shape that does not match goes back to the token
    # path, which names the offending element.
    ("%0 = stablehlo.constant dense<[1, 300]> : tensor<2xi8>", "1:35",
     "integer constant out of range for type"),
    ("%0 = stablehlo.constant dense<[1.5, 2.0]> : tensor<2xi32>", "1:32",
     "expected integer elements, but parsed floating-point"),
    ("%0 = stablehlo.constant dense<[[1, 2], [3]]> : tensor<2x2xf32>", "1:46",
     "tensor literal is invalid; ranks are not consistent between elements"),
    ('%0 = stablehlo.constant dense<"0xZZ"> : tensor<1xi8>', "1:31",
     "malformed hex blob in dense attribute"),
])
def test_fast_path_diagnostics(src, position, what):
  test_diagnostics(src, position, what)


def test_json_dense_literals_match_the_token_path():
  f = _constant("dense<[[1.5, -2], [3.0e+00, 4.25]]> : tensor<2x2xf32>")
  assert f.array.dtype == np.float32 and not f.splat
  assert f.array.tolist() == [[1.5, -2.0], [3.0, 4.25]]
  u = _constant("dense<[255, -1]> : tensor<2xui8>")
  assert u.array.dtype == np.uint8 and u.array.tolist() == [255, 255]
  big = _constant("dense<[18446744073709551615, 0]> : tensor<2xui64>")
  assert big.array.tolist() == [2**64 - 1, 0]
  # Not JSON: the token path reads them.
  assert _constant("dense<[true, false]> : tensor<2xi1>").array.tolist() == [
      True, False]
  assert _constant("dense<[0x7F800000, 1.]> : tensor<2xf32>").array[0] == \
      np.inf


def test_complex_and_boolean_constants():
  # Complex pairs of plain numbers are read in bulk (as json); pairs with
  # hex parts take the token path; both give the same values.
  c64 = _constant("dense<[(1.5,-2.0), (0.1, 3)]> : tensor<2xcomplex<f32>>")
  assert c64.array.dtype == np.complex64
  assert c64.array.tolist() == np.array(
      [complex(1.5, -2.0), complex(0.1, 3.0)], np.complex64).tolist()
  c128 = _constant("dense<[[(0.1,-0.0)], [(1.0e+300,2.5)]]> : "
                   "tensor<2x1xcomplex<f64>>")
  assert c128.array.tolist() == [[complex(0.1, -0.0)], [complex(1e300, 2.5)]]
  assert np.signbit(c128.array[0, 0].imag)
  nan = _constant("dense<[(0x7FC00000,1.0)]> : tensor<1xcomplex<f32>>")
  assert np.isnan(nan.array[0].real) and nan.array[0].imag == 1.0
  for bad in ("dense<[[1.0, 2.0]]> : tensor<1xcomplex<f32>>",
              "dense<[(1.0,2.0)]> : tensor<1x2xf32>",
              "dense<[(1.0,2.0,3.0)]> : tensor<1xcomplex<f32>>"):
    with pytest.raises(support.XlaError):
      _constant(bad)
  for _ in range(2):
    splat = _constant("dense<true> : tensor<3xi1>")
    assert splat.splat and splat.array.tolist() == [True, True, True]
  with pytest.raises(support.XlaError):
    _constant("dense<true> : tensor<3xi32>")


def test_repeated_constants_have_their_own_arrays():
  # The second and later parses of a constant's text reuse the first one's
  # decoding; each op still gets an array of its own to mutate.
  for literal, expected in (
      ("dense<7> : tensor<2xi32>", [7, 7]),
      ("dense<[1.5, -2.0]> : tensor<2xf32>", [1.5, -2.0]),
      ('dense<"0x0100000002000000"> : tensor<2xi32>', [1, 2])):
    first, second, third = (_constant(literal) for _ in range(3))
    first.array[0] = 42
    second.array[1] = 43
    assert third.array.tolist() == expected
    assert first.array.tolist() == [42, expected[1]]
    assert second.array.tolist() == [expected[0], 43]
    assert third.type == t.RankedTensorType((2,), third.type.element_type)
    assert third.splat == (literal == "dense<7> : tensor<2xi32>")
  # A short text for a large tensor is decoded each time, not kept.
  big = [_constant("dense<1.5> : tensor<4096xf32>") for _ in range(3)]
  big[0].array[0] = 0.0
  assert big[2].array.shape == (4096,) and (big[2].array == 1.5).all()
  assert big[1].splat and big[2].splat


def test_cached_types_and_attribute_dictionaries_are_per_text():
  m = text.parse_module('''
  func.func @f(%a: tensor<2xf32> {x.k = "v"}) -> (tensor<2xf32> {x.k = "v"}) {
    %0 = stablehlo.add %a, %a : tensor<2xf32>
    %1 = "t.op"(%0) {d = {// }
      k = 1 : i32}} : (tensor<2xf32>) -> tensor<2xcomplex<f32>>
    %2 = "t.fn"() : () -> ((tensor<2xf32>) -> tensor<2xf32>)
    return %0 : tensor<2xf32>
  }''')
  f = _only_func(m)
  add, op, fn, _ = f.regions[0].entry.operations
  assert add.results[0].type == t.RankedTensorType((2,), t.f32)
  assert op.results[0].type == t.RankedTensorType((2,), t.ComplexType(t.f32))
  inner = op.attributes["d"]
  assert inner == a.DictionaryAttr((("k", a.IntegerAttr(1, t.i32)),))
  assert isinstance(fn.results[0].type, t.FunctionType)
  arg_attrs = f.properties["arg_attrs"].elements[0]
  assert arg_attrs == a.DictionaryAttr((("x.k", a.StringAttr("v")),))


def test_operand_lists_with_comments_and_op_locations():
  m = text.parse_module(
      "func.func @f(%a: tensor<f32>, %b: tensor<f32>) -> tensor<f32> {\n"
      "  %0 = stablehlo.add %a, // first\n"
      "     %b : tensor<f32>\n"
      "\n"
      "  %1 = stablehlo.add %0, %b : tensor<f32>\n"
      "  return %1 : tensor<f32>\n"
      "}", "x.mlir", line_offset=10)
  f = _only_func(m)
  first, second, ret = f.regions[0].entry.operations
  args = f.regions[0].entry.arguments
  assert first.operands == args
  assert second.operands == [first.results[0], args[1]]
  assert (first.location.line, first.location.col) == (12, 8)
  assert (second.location.line, second.location.col) == (15, 8)
  assert second.location.text == '"x.mlir":15:8'
  assert ret.location.line == 16


# --- op fast paths (PrettyForm.fast) agree with the token path ------------------

_FAST_PATH_MODULE = '''
func.func @inputs() -> (tensor<2xf32>, tensor<2xi32>) {
  %0 = stablehlo.constant dense<"0x0000803F00000040"> : tensor<2xf32>
  %1 = stablehlo.constant dense<[7, -3]> : tensor<2xi32>
  return %0, %1 : tensor<2xf32>, tensor<2xi32>
}
func.func @main(%a: tensor<2xf32>, %b: tensor<2xf32>) -> tensor<2xf32> {
  %c = stablehlo.constant dense<"0x0000C07F"> : tensor<2xf32>
  %d = stablehlo.constant dense<-1.500000e+00> : tensor<2xf32>
  %e = stablehlo.constant dense<0x7FC00001> : tensor<2xf32>
  %u = stablehlo.constant dense<255> : tensor<2xui8>
  %0:2 = call @inputs() : () -> (tensor<2xf32>, tensor<2xi32>)
  %1 = stablehlo.add %a, %0#0 : tensor<2xf32>
  %2 = stablehlo.add %1, %b : tensor<2xf32>
  %3 = stablehlo.convert %2 : (tensor<2xf32>) -> tensor<2xf32>
  stablehlo.custom_call @check.expect_close(%3, %c) {has_side_effect = true} : (tensor<2xf32>, tensor<2xf32>) -> ()
  %4 = stablehlo.multiply %3, %d : tensor<2xf32> loc("here":3:4)
  %5 = stablehlo.add %4, %later : tensor<2xf32>
  %later = stablehlo.add %e, %e : tensor<2xf32>
  %bc = stablehlo.broadcast_in_dim %later, dims = [0] : (tensor<2xf32>) -> tensor<2xf32>
  %i = stablehlo.iota dim = 0 : tensor<2xi32>
  %r = stablehlo.reshape %i : (tensor<2xi32>) -> tensor<2xi32>
  %v = stablehlo.reverse %bc, dims = [0] : tensor<2xf32>
  return %5 : tensor<2xf32>
}
func.func private @g(%x: tensor<2xf32> {x.k = "v"}, %y: tensor<2xi32>) -> (tensor<2xf32> {x.r = 1 : i32}, tensor<2xi32>) attributes {x.f = true} {
  return %x, %y : tensor<2xf32>, tensor<2xi32>
}
func.func public @h() -> () {
  return
}
'''


def _without_fast_paths(monkeypatch):
  import dataclasses  # pylint: disable=g-import-not-at-top
  from stablehlo._src.text import pretty_ops  # pylint: disable=g-import-not-at-top
  for name, form in list(pretty_ops.PRETTY_FORMS.items()):
    if form.fast is not None:
      monkeypatch.setitem(pretty_ops.PRETTY_FORMS, name,
                          dataclasses.replace(form, fast=None))


def _fingerprint(module):
  out = [text.print_module(module, generic=True, print_locations=True,
                           keep_source_names=True)]
  for op in module.walk():
    out.append((op.name, op.location, [type(v.owner) for v in op.operands]))
    for value in list(op.attributes.values()) + list(op.properties.values()):
      arr = getattr(value, "array", None)
      if arr is not None:
        out.append((arr.dtype.str, arr.shape, arr.tobytes(), value.splat))
  return out


def test_op_fast_paths_give_what_the_token_path_gives(monkeypatch):
  text.parse_module(_FAST_PATH_MODULE)  # the caches now hold its types
  fast = _fingerprint(text.parse_module(_FAST_PATH_MODULE, "x.mlir"))
  _without_fast_paths(monkeypatch)
  slow = _fingerprint(text.parse_module(_FAST_PATH_MODULE, "x.mlir"))
  assert fast == slow


@pytest.mark.parametrize("line, position, what", [
    ("%1 = stablehlo.add %a, %a : tensor<3xf32>", "3:22",
     "use of value '%a' expects different type than prior uses"),
    ("%1 = stablehlo.constant dense<300> : tensor<2xi8>", "3:33",
     "integer constant out of range for type"),
    ('%1 = stablehlo.constant dense<"0x00"> : tensor<2xf32>', "3:41",
     "hex blob size does not match the tensor type"),
    ("stablehlo.custom_call @f(%a) : (tensor<2xf32>, tensor<2xf32>) -> ()",
     "3:28", "1 operands present, but expected 2"),
])
def test_op_fast_path_errors_come_from_the_token_path(line, position, what):
  warm = ("func.func @w(%a: tensor<2xf32>) {\n"
          "  %1 = stablehlo.add %a, %a : tensor<3xf32>\n}")
  with pytest.raises(text.ParseError):
    text.parse_module(warm)
  src = ("func.func @f(%a: tensor<2xf32>, %b: tensor<3xf32>) {\n"
         "  %0 = stablehlo.add %a, %a : tensor<2xf32>\n"
         f"  {line}\n"
         "  return\n}")
  with pytest.raises(text.ParseError) as e:
    text.parse_module(src)
  assert position in str(e.value) and what in str(e.value)
