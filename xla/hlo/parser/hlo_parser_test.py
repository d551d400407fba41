"""Tests for the HLO text parser: every opcode, every attribute syntax,
round trips, positioned errors and a mutation fuzz."""

import random

import pytest

import support
from xla import xla_data as xd
from xla.hlo.ir import hlo_attrs
from xla.hlo.ir import hlo_printer as pr
from xla.hlo.ir.hlo_opcode import HloOpcode as O
from xla.hlo.parser import hlo_parser as hp
from xla.service import hlo_verifier

parse = hp.parse_and_return_unverified_module

BRIEF_EXAMPLE = """HloModule m, entry_computation_layout={(f32[4]{0})->f32[]}

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  p0 = f32[4]{0} parameter(0)
  c = f32[] constant(0)
  ROOT r = f32[] reduce(p0, c), dimensions={0}, to_apply=add
}

"""


def round_trip(text):
  """Parses, verifies, prints; the print must re-parse to the same text."""
  module = parse(text)
  hlo_verifier.verify(module)
  printed = module.to_string()
  again = parse(printed)
  assert again.to_string() == printed
  return module, printed


def test_brief_example():
  module, printed = round_trip(BRIEF_EXAMPLE)
  assert printed == BRIEF_EXAMPLE
  r = module.entry_computation.root_instruction
  assert r.opcode == O.kReduce and r.dimensions == (0,)
  assert r.to_apply.name == "add"


ADD = "add { x = f32[] parameter(0)  y = f32[] parameter(1)  " \
      "ROOT s = f32[] add(x, y) }\n"
MAX = "max { x = f32[] parameter(0)  y = f32[] parameter(1)  " \
      "ROOT s = f32[] maximum(x, y) }\n"
LESS = "less { x = f32[] parameter(0)  y = f32[] parameter(1)  " \
       "ROOT s = pred[] compare(x, y), direction=LT }\n"
GE = "ge { x = f32[] parameter(0)  y = f32[] parameter(1)  " \
     "ROOT s = pred[] compare(x, y), direction=GE }\n"
NEG = "neg { x = f32[4] parameter(0)  ROOT n = f32[4] negate(x) }\n"
ACC = ("acc { c = f32[] parameter(0)  x = f32[] parameter(1)  "
       "s = f32[] add(c, x)  ROOT t = (f32[], f32[]) tuple(s, s) }\n")
ACC2 = ("acc2 { a = f32[] parameter(0)  b = f32[] parameter(1)  "
        "c = f32[] parameter(2)  d = f32[] parameter(3)  "
        "s = f32[] add(a, c)  t = f32[] maximum(b, d)  "
        "ROOT r = (f32[], f32[]) tuple(s, t) }\n")
COND = ("cond { s = (s32[], f32[4]) parameter(0)  i = s32[] "
        "get-tuple-element(s), index=0  n = s32[] constant(3)  "
        "ROOT lt = pred[] compare(i, n), direction=LT }\n")
BODY = ("body { s = (s32[], f32[4]) parameter(0)  i = s32[] "
        "get-tuple-element(s), index=0  one = s32[] constant(1)  "
        "j = s32[] add(i, one)  v = f32[4] get-tuple-element(s), index=1  "
        "w = f32[4] negate(v)  ROOT t = (s32[], f32[4]) tuple(j, w) }\n")

P4 = "p = f32[4] parameter(0)\n"
Q4 = "q = f32[4] parameter(1)\n"
I4 = "i = s32[4] parameter(0)\n j = s32[4] parameter(1)\n"
B4 = "a = pred[4] parameter(0)\n b = pred[4] parameter(1)\n"
C4 = "z = c64[4] parameter(0)\n"
TOK = "t = token[] after-all()\n"

# Opcode -> (helper computations, entry body). One sample per opcode.
SAMPLES = {}
for _op in ("abs", "ceil", "cosine", "exponential", "floor", "log",
            "negate", "sign", "sine", "sqrt", "tanh", "rsqrt", "cbrt",
            "acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh",
            "sinh", "tan", "erf", "exponential-minus-one", "log-plus-one",
            "logistic", "round-nearest-afz", "round-nearest-even", "copy"):
  SAMPLES[_op] = ("", P4 + f"ROOT r = f32[4] {_op}(p)")
for _op in ("add", "subtract", "multiply", "divide", "maximum", "minimum",
            "power", "remainder", "atan2"):
  SAMPLES[_op] = ("", P4 + Q4 + f"ROOT r = f32[4] {_op}(p, q)")
for _op in ("and", "or", "xor"):
  SAMPLES[_op] = ("", B4 + f"ROOT r = pred[4] {_op}(a, b)")
for _op in ("shift-left", "shift-right-arithmetic", "shift-right-logical",
            "mulhi"):
  SAMPLES[_op] = ("", I4 + f"ROOT r = s32[4] {_op}(i, j)")
SAMPLES.update({
    "not": ("", B4 + "ROOT r = pred[4] not(a)"),
    "popcnt": ("", I4 + "ROOT r = s32[4] popcnt(i)"),
    "count-leading-zeros": ("", I4 + "ROOT r = s32[4] count-leading-zeros(i)"),
    "is-finite": ("", P4 + "ROOT r = pred[4] is-finite(p)"),
    "real": ("", C4 + "ROOT r = f32[4] real(z)"),
    "imag": ("", C4 + "ROOT r = f32[4] imag(z)"),
    "complex": ("", P4 + Q4 + "ROOT r = c64[4] complex(p, q)"),
    "compare": ("", P4 + Q4 + "ROOT r = pred[4] compare(p, q), "
                "direction=GE, type=TOTALORDER"),
    "select": ("", B4 + "p = f32[4] parameter(2)\n q = f32[4] parameter(3)\n"
               "ROOT r = f32[4] select(a, p, q)"),
    "clamp": ("", "lo = f32[] parameter(0)\n p = f32[4] parameter(1)\n"
              "ROOT r = f32[4] clamp(lo, p, lo)"),
    "convert": ("", P4 + "ROOT r = s32[4] convert(p)"),
    "bitcast-convert": ("", P4 + "ROOT r = u8[4,4] bitcast-convert(p)"),
    "bitcast": ("", P4 + "ROOT r = f32[2,2] bitcast(p)"),
    "stochastic-convert": ("", P4 + "u = u32[4] parameter(1)\n"
                           "ROOT r = bf16[4] stochastic-convert(p, u)"),
    "reduce-precision": ("", P4 + "ROOT r = f32[4] reduce-precision(p), "
                         "exponent_bits=5, mantissa_bits=10"),
    "opt-barrier": ("", P4 + "t = (f32[4]) tuple(p)\n"
                    "ROOT r = (f32[4]) opt-barrier(t)"),
    "after-all": ("", P4 + "ROOT t = token[] after-all()"),
    "add-dependency": ("", P4 + TOK + "ROOT r = f32[4] add-dependency(p, t)"),
    "all-gather": ("", P4 + "ROOT r = f32[8] all-gather(p), channel_id=1, "
                   "replica_groups={{0,1}}, dimensions={0}, "
                   "use_global_device_ids=true"),
    "all-gather-start": ("", P4 + "s = (f32[4], f32[8]) all-gather-start(p),"
                         " replica_groups=[1,2]<=[2], dimensions={0}\n"
                         "ROOT r = f32[8] all-gather-done(s)"),
    "all-reduce": (ADD, P4 + "ROOT r = f32[4] all-reduce(p), "
                   "replica_groups={}, constrain_layout=true, to_apply=add"),
    "all-reduce-start": (ADD, P4 + "s = f32[4] all-reduce-start(p), "
                         "to_apply=add\nROOT r = f32[4] all-reduce-done(s)"),
    "all-to-all": ("", P4 + "ROOT r = f32[4] all-to-all(p), "
                   "replica_groups={{0,1}}, dimensions={0}"),
    "ragged-all-to-all": ("", P4 + "o = f32[4] parameter(1)\n"
                          "s = s64[2] parameter(2)\n"
                          "ROOT r = f32[4] ragged-all-to-all(p, o, s, s, s, "
                          "s), replica_groups={{0,1}}"),
    "async-start": (NEG, P4 + "s = ((f32[4]), f32[4], s32[]) async-start(p), "
                    'async_execution_thread="side", calls=neg\n'
                    "u = ((f32[4]), f32[4], s32[]) async-update(s)\n"
                    "ROOT d = f32[4] async-done(u)"),
    "batch-norm-training": ("", "x = f32[2,3] parameter(0)\n"
                            "s = f32[3] parameter(1)\n"
                            "ROOT r = (f32[2,3], f32[3], f32[3]) "
                            "batch-norm-training(x, s, s), epsilon=0.001, "
                            "feature_index=1"),
    "batch-norm-inference": ("", "x = f32[2,3] parameter(0)\n"
                             "s = f32[3] parameter(1)\n"
                             "ROOT r = f32[2,3] batch-norm-inference(x, s, s,"
                             " s, s), epsilon=0.5, feature_index=1"),
    "batch-norm-grad": ("", "x = f32[2,3] parameter(0)\n"
                        "s = f32[3] parameter(1)\n"
                        "ROOT r = (f32[2,3], f32[3], f32[3]) batch-norm-grad"
                        "(x, s, s, s, x), epsilon=0.5, feature_index=1"),
    "broadcast": ("", P4 + "ROOT r = f32[3,4] broadcast(p), dimensions={1}"),
    "call": (NEG, P4 + "ROOT r = f32[4] call(p), to_apply=neg"),
    "cholesky": ("", "a = f32[3,3] parameter(0)\n"
                 "ROOT r = f32[3,3] cholesky(a), lower=true"),
    "collective-broadcast": ("", P4 + "ROOT r = f32[4] collective-broadcast"
                             "(p), replica_groups={{0,1}}"),
    "collective-permute": ("", P4 + "ROOT r = f32[4] collective-permute(p), "
                           "channel_id=2, source_target_pairs={{0,1},{1,0}}"),
    "collective-permute-start": ("", P4 + "s = (f32[4], f32[4]) "
                                 "collective-permute-start(p), "
                                 "source_target_pairs={{0,1}}\n"
                                 "ROOT r = f32[4] collective-permute-done(s)"),
    "concatenate": ("", P4 + Q4 + "ROOT r = f32[8] concatenate(p, q), "
                    "dimensions={0}"),
    "conditional": (NEG + "neg2 { x = f32[4] parameter(0)  "
                    "ROOT n = f32[4] abs(x) }\n",
                    "b = s32[] parameter(0)\n p = f32[4] parameter(1)\n"
                    "ROOT r = f32[4] conditional(b, p, p), "
                    "branch_computations={neg, neg2}"),
    "constant": ("", "ROOT c = (f32[2], pred[]) constant(({1.5, -2}, true))"),
    "convolution": ("", "x = f32[1,8,8,3] parameter(0)\n"
                    "w = f32[3,3,3,16] parameter(1)\n"
                    "ROOT r = f32[1,4,4,16] convolution(x, w), "
                    "window={size=3x3 stride=2x2 pad=1_1x1_1}, "
                    "dim_labels=b01f_01io->b01f, "
                    "operand_precision={high,default}"),
    "copy-start": ("", P4 + "s = (f32[4], f32[4], u32[]) copy-start(p), "
                   "cross_program_prefetch_index=0\n"
                   "ROOT r = f32[4] copy-done(s)"),
    "custom-call": (ADD, P4 + 'ROOT r = (f32[4], s32[]) custom-call(p), '
                    'custom_call_target="my_target", '
                    'operand_layout_constraints={f32[4]{0}}, '
                    'custom_call_has_side_effect=true, '
                    'output_to_operand_aliasing={{0}: (0, {})}, '
                    'schedule=SCHEDULE_LATEST, '
                    'api_version=API_VERSION_TYPED_FFI, '
                    'called_computations={add}, '
                    'backend_config={"k": [1, 2]}'),
    "domain": ("", P4 + "ROOT r = f32[4] domain(p), domain={kind=\"sharding\","
               " entry={maximal device=0}, exit={replicated}}"),
    "dot": ("", "a = f32[2,3,4] parameter(0)\n b = f32[2,4,5] parameter(1)\n"
            "ROOT r = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, "
            "lhs_contracting_dims={2}, rhs_batch_dims={0}, "
            "rhs_contracting_dims={1}, algorithm=dot_f32_f32_f32"),
    "ragged-dot": ("", "a = f32[8,4] parameter(0)\n b = f32[2,4,5] "
                   "parameter(1)\n g = s64[2] parameter(2)\n"
                   "ROOT r = f32[8,5] ragged-dot(a, b, g), "
                   "lhs_contracting_dims={1}, rhs_contracting_dims={1}, "
                   "lhs_ragged_dims={0}, rhs_group_dims={0}"),
    "scaled-dot": ("", "a = f32[2,4] parameter(0)\n s = f32[2,1] "
                   "parameter(1)\n b = f32[4,3] parameter(2)\n"
                   "t = f32[1,3] parameter(3)\n"
                   "ROOT r = f32[2,3] scaled-dot(a, s, b, t), "
                   "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    "dynamic-reshape": ("", "p = f32[<=4] parameter(0)\n"
                        "d = s32[] parameter(1)\n"
                        "ROOT r = f32[<=2,2] dynamic-reshape(p, d, d)"),
    "dynamic-slice": ("", "p = f32[8,8] parameter(0)\n i = s32[] "
                      "parameter(1)\nROOT r = f32[2,8] dynamic-slice(p, i, "
                      "i), dynamic_slice_sizes={2,8}"),
    "dynamic-update-slice": ("", "p = f32[8] parameter(0)\n u = f32[2] "
                             "parameter(1)\n i = s32[] parameter(2)\n"
                             "ROOT r = f32[8] dynamic-update-slice(p, u, i)"),
    "fft": ("", C4 + "ROOT r = c64[4] fft(z), fft_type=FFT, fft_length={4}"),
    "fusion": (NEG, P4 + "ROOT r = f32[4] fusion(p), kind=kLoop, calls=neg"),
    "gather": ("", "p = f32[4,8] parameter(0)\n i = s32[3,1] parameter(1)\n"
               "ROOT r = f32[3,8] gather(p, i), offset_dims={1}, "
               "collapsed_slice_dims={0}, start_index_map={0}, "
               "index_vector_dim=1, slice_sizes={1,8}, "
               "indices_are_sorted=true"),
    "get-dimension-size": ("", P4 + "ROOT r = s32[] get-dimension-size(p), "
                           "dimensions={0}"),
    "set-dimension-size": ("", P4 + "d = s32[] parameter(1)\n"
                           "ROOT r = f32[<=4] set-dimension-size(p, d), "
                           "dimensions={0}"),
    "get-tuple-element": ("", "t = (f32[4], s32[]) parameter(0)\n"
                          "ROOT r = s32[] get-tuple-element(t), index=1"),
    "infeed": ("", TOK + 'ROOT r = (f32[4], token[]) infeed(t), '
               'infeed_config="cfg"'),
    "outfeed": ("", P4 + TOK + 'ROOT r = token[] outfeed(p, t), '
                'outfeed_shape=f32[4]{0}, outfeed_config="o"'),
    "iota": ("", "ROOT r = s32[3,4] iota(), iota_dimension=1"),
    "map": (ADD, P4 + Q4 + "ROOT r = f32[4] map(p, q), dimensions={0}, "
            "to_apply=add"),
    "pad": ("", "p = f32[2,3] parameter(0)\n z = f32[] parameter(1)\n"
            "ROOT r = f32[6,4] pad(p, z), padding=1_2_1x0_1"),
    "parameter": ("", "ROOT p = f32[4] parameter(0), "
                  "parameter_replication={true}, sharding={replicated}"),
    "partition-id": ("", "ROOT r = u32[] partition-id()"),
    "replica-id": ("", "ROOT r = u32[] replica-id()"),
    "recv": ("", TOK + "r = (f32[4], u32[], token[]) recv(t), channel_id=5,"
             " is_host_transfer=true\n"
             "ROOT d = (f32[4], token[]) recv-done(r), channel_id=5, "
             "is_host_transfer=true"),
    "send": ("", P4 + TOK + "s = (f32[4], u32[], token[]) send(p, t), "
             "channel_id=6\nROOT d = token[] send-done(s), channel_id=6"),
    "reduce": (ACC2, "p = f32[4,5] parameter(0)\n z = f32[] constant(0)\n"
               "ROOT r = (f32[5], f32[5]) reduce(p, p, z, z), dimensions={0},"
               " to_apply=acc2"),
    "reduce-scatter": (ADD, P4 + "ROOT r = f32[2] reduce-scatter(p), "
                       "replica_groups={{0,1}}, dimensions={0}, "
                       "to_apply=add"),
    "reduce-window": (MAX, "p = f32[4,6] parameter(0)\n"
                      "z = f32[] constant(-inf)\n"
                      "ROOT r = f32[2,3] reduce-window(p, z), window={size=2x2"
                      " stride=2x2}, to_apply=max"),
    "reshape": ("", P4 + "ROOT r = f32[2,2] reshape(p)"),
    "reverse": ("", P4 + "ROOT r = f32[4] reverse(p), dimensions={0}"),
    "rng": ("", "a = f32[] parameter(0)\n b = f32[] parameter(1)\n"
            "ROOT r = f32[4] rng(a, b), distribution=rng_normal"),
    "rng-bit-generator": ("", "s = u64[2] parameter(0)\n"
                          "ROOT r = (u64[2], u32[4]) rng-bit-generator(s), "
                          "algorithm=rng_three_fry"),
    "rng-get-and-update-state": ("", "ROOT r = u64[2] rng-get-and-update-"
                                 "state(), delta=4096"),
    "scan": (ACC, P4 + "z = f32[] constant(0)\n"
             "ROOT r = (f32[4], f32[]) scan(p, z), dimensions={0}, "
             "num_carries=1, is_reverse=true, to_apply=acc"),
    "scatter": (ADD, "p = f32[4,8] parameter(0)\n i = s32[2,1] "
                "parameter(1)\n u = f32[2,8] parameter(2)\n"
                "ROOT r = f32[4,8] scatter(p, i, u), update_window_dims={1}, "
                "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                "index_vector_dim=1, unique_indices=true, to_apply=add"),
    "select-and-scatter": (GE + ADD, "p = f32[4,6] parameter(0)\n"
                           "s = f32[2,3] parameter(1)\n"
                           "z = f32[] constant(0)\n"
                           "ROOT r = f32[4,6] select-and-scatter(p, s, z), "
                           "window={size=2x2 stride=2x2}, select=ge, "
                           "scatter=add"),
    "slice": ("", "p = f32[4,9] parameter(0)\n"
              "ROOT r = f32[2,5] slice(p), slice={[1:3], [0:9:2]}"),
    "sort": (LESS, P4 + "i = s32[4] parameter(1)\n"
             "ROOT r = (f32[4], s32[4]) sort(p, i), dimensions={0}, "
             "is_stable=true, to_apply=lessi"),
    "topk": ("", "p = f32[2,5] parameter(0)\n"
             "ROOT r = (f32[2,3], s32[2,3]) topk(p), k=3, largest=false"),
    "transpose": ("", "p = f32[2,3] parameter(0)\n"
                  "ROOT r = f32[3,2] transpose(p), dimensions={1,0}"),
    "triangular-solve": ("", "a = f32[3,3] parameter(0)\n"
                         "b = f32[3,2] parameter(1)\n"
                         "ROOT r = f32[3,2] triangular-solve(a, b), "
                         "left_side=true, lower=true, "
                         "transpose_a=NO_TRANSPOSE"),
    "tuple": ("", P4 + "ROOT r = (f32[4], f32[4]) tuple(p, p)"),
    "while": (COND + BODY, "s = (s32[], f32[4]) parameter(0)\n"
              "ROOT w = (s32[], f32[4]) while(s), condition=cond, "
              "body=body"),
})
# The sort comparator over (f32, s32) pairs.
SAMPLES["sort"] = (
    "lessi { a = f32[] parameter(0)  b = f32[] parameter(1)  "
    "c = s32[] parameter(2)  d = s32[] parameter(3)  "
    "ROOT lt = pred[] compare(a, b), direction=LT }\n", SAMPLES["sort"][1])

# Opcodes that appear in another sample (their *-done / -update partner).
PARTNERS = {"all-gather-done": "all-gather-start",
            "all-reduce-done": "all-reduce-start",
            "collective-permute-done": "collective-permute-start",
            "copy-done": "copy-start", "recv-done": "recv",
            "send-done": "send", "async-update": "async-start",
            "async-done": "async-start"}


def _module_text(op):
  helpers, body = SAMPLES[op]
  return f"HloModule {op.replace('-', '_')}\n{helpers}ENTRY e {{\n{body}\n}}\n"


def test_every_opcode_has_a_sample():
  covered = set(SAMPLES) | set(PARTNERS)
  unsupported = {op.value for op in hlo_attrs.UNSUPPORTED_OPCODES}
  assert covered | unsupported == {op.value for op in O}


@pytest.mark.parametrize("op", sorted(SAMPLES))
def test_opcode_round_trips_and_verifies(op):
  module, printed = round_trip(_module_text(op))
  ops = {i.opcode.value for i in module.instructions()}
  assert op in ops
  for partner, starter in PARTNERS.items():
    if starter == op:
      assert partner in ops


def test_attribute_values_land_in_the_ir():
  m = parse(_module_text("convolution"))
  conv = m.entry_computation.root_instruction
  assert conv.window.dimensions[0] == xd.WindowDimension(
      size=3, stride=2, padding_low=1, padding_high=1)
  assert conv.convolution_dimension_numbers.input_feature_dimension == 3
  assert conv.attr("operand_precision") == (xd.Precision.HIGH,
                                            xd.Precision.DEFAULT)
  cc = parse(_module_text("custom-call")).entry_computation.root_instruction
  assert cc.custom_call_target == "my_target"
  assert cc.backend_config == '{"k": [1, 2]}'
  assert cc.attr("api_version") == (
      xd.CustomCallApiVersion.API_VERSION_TYPED_FFI)
  assert [c.name for c in cc.called_computations()] == ["add"]
  p = parse(_module_text("parameter")).entry_computation.root_instruction
  assert p.parameter_replication == (True,)
  assert p.sharding.text == "{replicated}"
  cmp = parse(_module_text("compare")).entry_computation.root_instruction
  assert cmp.attr("type") == xd.ComparisonType.TOTALORDER


FULL = """HloModule full, is_scheduled=true, input_output_alias={ {0}: (0, {}, may-alias), {1}: (1, {}, must-alias) }, buffer_donor={ (1, {}) }, alias_passthrough_params=true, entry_computation_layout={(f32[4]{0}, f32[4]{0})->(f32[4]{0}, f32[4]{0})}, allow_spmd_sharding_propagation_to_parameters={false,true}, allow_spmd_sharding_propagation_to_output={true}, replica_count=2, num_partitions=4, frontend_attributes={attr="v"}

FileNames
1 "a.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=3 end_line=3 column=1 end_column=9}

StackFrames
1 {file_location_id=1 parent_frame_id=1}


ENTRY main {
  p = f32[4]{0} parameter(0), sharding={devices=[2]0,1}
  q = f32[4]{0} parameter(1)
  n = f32[4]{0} negate(p), control-predecessors={q}, frontend_attributes={_xla={"a": 1},b="2"}, statistics={visualizing_index=1,stat-1=33.5}, origin={{"n"}}, metadata={op_type="neg" op_name="jit(f)/neg" source_file="a.py" source_line=3 stack_frame_id=1}
  e = f32[4]{0} exponential(q), result_accuracy={mode=highest}, backend_config="not a dict"
  ROOT t = (f32[4]{0}, f32[4]{0}) tuple(n, e)
}, execution_thread="main"

"""


def test_full_header_and_common_attributes_round_trip():
  module = parse(FULL)
  text = module.to_string()
  # execution_thread="main" is the default and is not printed back.
  assert text == FULL.replace(', execution_thread="main"', "")
  assert module.config.num_partitions == 4
  assert module.config.use_spmd_partitioning
  assert module.input_output_aliases[1].must_alias
  assert module.stack_frame_index.file_names == ("a.py",)
  n = module.entry_computation.get_instruction_with_name("n")
  assert [c.name for c in n.control_predecessors] == ["q"]
  assert n.metadata.source_line == 3
  assert n.frontend_attributes["_xla"] == '{"a": 1}'
  hlo_verifier.verify(module)


def test_long_form_round_trip():
  module = parse(FULL)
  long_text = module.to_string(pr.HloPrintOptions.long_form())
  assert "ENTRY %main (p: f32[4], q: f32[4]) -> (f32[4], f32[4]) {" in (
      long_text)
  assert parse(long_text).to_string() == module.to_string()


def test_optional_shapes_nested_instructions_and_anonymous_computations():
  text = """HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  s = add(a, b)
  t = transpose(s), dimensions={1,0}
  d = dot(a, t), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  c = f32[2,3] add(f32[2,3] a, multiply(a, b))
  ROOT r = reduce(c, f32[] constant(0)), dimensions={0,1}, to_apply={
    x = f32[] parameter(0)
    y = f32[] parameter(1)
    ROOT z = f32[] add(x, y)
  }
}
"""
  m = parse(text)
  hlo_verifier.verify(m)
  comp = m.entry_computation
  assert str(comp.get_instruction_with_name("s").shape) == "f32[2,3]{1,0}"
  assert str(comp.get_instruction_with_name("t").shape) == "f32[3,2]{1,0}"
  assert str(comp.get_instruction_with_name("d").shape) == "f32[2,2]{1,0}"
  assert str(comp.root_instruction.shape) == "f32[]"
  assert len(m.computations) == 2
  assert parse(m.to_string()).to_string() == m.to_string()


def test_no_header_and_no_entry_keyword():
  m = parse("add { x=f32[] parameter(0) ROOT n = f32[] negate(x) }\n"
            "main { y = f32[] parameter(0) ROOT c = f32[] call(y), "
            "to_apply=add }")
  assert m.name == "module_main" and m.entry_computation.name == "main"


def test_same_names_in_two_computations_are_uniquified():
  m = parse("HloModule m\nf { x = f32[] parameter(0) ROOT y = f32[] "
            "negate(x) }\nENTRY e { x = f32[] parameter(0) ROOT y = f32[] "
            "call(x), to_apply=f }")
  names = [i.name for i in m.instructions()]
  assert names == ["x", "y", "x.1", "y.1"]
  hlo_verifier.verify(m)


ERRORS = [
    ("HloModule m\nENTRY e {\n  ROOT r = f32[] frob(x)\n}",
     "3:18", "expects opcode but sees: frob"),
    ("HloModule m\nENTRY e {\n  ROOT r = f32[] negate(x)\n}",
     "3:25", "instruction does not exist: x"),
    ("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n"
     "  ROOT r = f32[] add(p)\n}", "4:21", "expects 2 operands, but has 1"),
    ("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] reverse(p), dims={0}\n}", "4:31",
     "unexpected attribute \"dims\" for reverse"),
    ("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] reverse(p)\n}", "4:19",
     "attribute dimensions is expected but not seen"),
    ("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n"
     "  ROOT r = f32[] call(p), to_apply=nowhere\n}", "4:36",
     "computation does not exist: nowhere"),
    ("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n"
     "  p = f32[] negate(p)\n}", "4:3", "instruction already exists: p"),
    ("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n"
     "  q = f32[] parameter(0)\n}", "4:13", "already allocated"),
    ("HloModule m\nENTRY e {\n  p = f32[] parameter(1)\n}", "2:9",
     "parameter 0 is missing"),
    ("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
     "  ROOT r = f32[4] compare(p, p), direction=XX\n}", "4:44",
     "unknown direction 'XX'"),
    ("HloModule m\nENTRY e {\n  ROOT c = s8[] constant(300)\n}", "3:26",
     "out of range"),
    ("HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1})\n}", "3:30",
     "expected 2 elements"),
    ("HloModule m\nENTRY e {\n  ROOT r = negate(p)", "3:19",
     "instruction does not exist"),
    ("HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT r = f32[] "
     "negate(p)\n", "5:1", "saw end of input"),
    ("HloModule m\nENTRY e {\n  ROOT r = token[] after-all(), "
     "metadata={op_name=\"x\" bad=1}\n}", "3:55",
     "unexpected metadata attribute"),
    ('HloModule m\nENTRY e {\n  ROOT r = f32[] parameter(0), '
     'backend_config="unterminated\n}', "3:47", "unterminated string"),
    ("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = "
     "f32[4] slice(p), slice={[0:1:2:3]}\n}", "4:36",
     "expects \\[start:limit:step\\]"),
    ("HloModule m\nENTRY e {\n  ROOT b = pred[] parameter(0)\n}\n"
     "ENTRY f {\n  ROOT b = pred[] parameter(0)\n}", "5:1",
     "only one ENTRY"),
]


@pytest.mark.parametrize("text,where,message", ERRORS)
def test_errors_are_positioned(text, where, message):
  with pytest.raises(support.InvalidArgumentError, match=message) as e:
    parse(text)
  assert isinstance(e.value, hp.HloParseError)
  assert str(e.value).startswith(where + ": error: ")
  lines = str(e.value).splitlines()
  col = int(where.split(":")[1])
  assert lines[2] == " " * (col - 1) + "^"


@pytest.mark.parametrize("text,message", [
    ("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = "
     "(f32[4], f32[4], s32[]) negate-start(p)\n}", "async wrapper syntax"),
    ("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT r = "
     "f32[4] shuffle(p)\n}", "opcode shuffle"),
    ("HloModule m\nENTRY e {\n  ROOT c = s1[2] constant({0, 1})\n}", "s1"),
])
def test_unimplemented_features(text, message):
  with pytest.raises(support.UnimplementedError, match=message) as e:
    parse(text)
  assert str(e.value).startswith("4:") or str(e.value).startswith("3:")


def test_verified_entry_point_runs_the_verifier():
  bad = ("HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n"
         "  ROOT r = f32[5] negate(p)\n}")
  parse(bad)  # parses fine
  with pytest.raises(support.InvalidArgumentError, match="shape mismatch"):
    hp.parse_and_return_verified_module(bad)


def test_mutation_fuzz_raises_only_our_errors():
  """Random edits of valid modules: parsing fails only with positioned
  errors, and the verifier only with HloVerifierError."""
  rng = random.Random(1234)
  corpus = [FULL, BRIEF_EXAMPLE] + [_module_text(op) for op in (
      "convolution", "custom-call", "while", "sort", "gather", "constant")]
  pieces = ["{", "}", "(", ")", ",", "=", "%", "ROOT", "f32[]", "[", "]",
            "->", '"', "/*", "-", "1", "x", ":", "...", "<=", "nan("]
  for i in range(400):
    text = rng.choice(corpus)
    pos = rng.randrange(len(text))
    if i % 3 == 0:
      text = text[:pos] + text[pos + rng.randrange(1, 6):]
    elif i % 3 == 1:
      text = text[:pos] + rng.choice(pieces) + text[pos:]
    else:
      text = text[:pos]
    try:
      module = parse(text)
    except (hp.HloParseError, hp.HloParseUnimplementedError):
      continue
    # What parses may still be invalid; the verifier must say so cleanly.
    hlo_verifier.verify_or_none(module)
