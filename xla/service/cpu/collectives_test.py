"""Tests of collectives between participants (collectives.py and the
multi-participant half of collective_emitter.py): HLO programs compiled for
several replicas / partitions and run with one argument list per
participant, against numpy and the StableHLO interpreter."""

import threading

import ml_dtypes
import numpy as np
import pytest

import support
from stablehlo import interpreter
from stablehlo import text as mlir_text
from xla.service.cpu import collectives
from xla.service.cpu import cpu_compiler
from xla.service.cpu import cpu_testing
from xla.service.cpu import thunk as thunk_lib
from xla.translate import stablehlo_to_hlo

_REDUCERS = """
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
isum {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
"""


def _module(body: str, params: str = "x = f32[8] parameter(0)",
            replicas: int = 1, partitions: int = 4,
            computations: str = _REDUCERS) -> str:
  header = "HloModule m"
  if replicas > 1:
    header += f", replica_count={replicas}"
  if partitions > 1:
    header += f", num_partitions={partitions}"
  return f"""{header}
{computations}
ENTRY e {{
  {params}
  {body}
}}
"""


def _run(text: str, argument_lists, **kw):
  _, exe = cpu_testing.compile_text(text)
  return exe.execute_spmd(argument_lists, **kw)


def _inputs(n: int, shape=(8,), dtype=np.float32, seed: int = 0):
  rng = np.random.default_rng(seed)
  if np.dtype(dtype).kind in "iu":
    return [rng.integers(-50, 50, shape).astype(dtype) for _ in range(n)]
  if np.dtype(dtype).kind == "b":
    return [rng.random(shape) < 0.5 for _ in range(n)]
  return [rng.standard_normal(shape).astype(dtype) for _ in range(n)]


# -- ids -----------------------------------------------------------------------


def test_replica_and_partition_ids():
  text = _module("""r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, p)""", params="", replicas=2,
                 partitions=3)
  got = _run(text, [[] for _ in range(6)])
  assert [(int(r), int(p)) for r, p in got] == [
      (r, p) for r in range(2) for p in range(3)]
  assert all(r.dtype == np.uint32 for pair in got for r in pair)


def test_partition_id_selects_a_slice():
  # What a partitioned program does with partition-id: its own rows.
  text = _module("""p = u32[] partition-id()
  four = u32[] constant(2)
  off = u32[] multiply(p, four)
  zero = u32[] constant(0)
  ROOT s = f32[2,3] dynamic-slice(x, off, zero), dynamic_slice_sizes={2,3}""",
                 params="x = f32[8,3] parameter(0)")
  x = np.arange(24, dtype=np.float32).reshape(8, 3)
  got = _run(text, [[x]] * 4)
  for p, (s,) in enumerate(got):
    np.testing.assert_array_equal(s, x[2 * p:2 * p + 2])


# -- all-reduce ----------------------------------------------------------------


def test_all_reduce_flattened_ids_pairs():
  text = _module("ROOT ar = f32[8] all-reduce(x), channel_id=1, "
                 "replica_groups={{0,1},{2,3}}, use_global_device_ids=true, "
                 "to_apply=sum")
  xs = _inputs(4)
  got = _run(text, [[x] for x in xs])
  for i, (r,) in enumerate(got):
    pair = (0, 1) if i < 2 else (2, 3)
    np.testing.assert_allclose(r, xs[pair[0]] + xs[pair[1]], rtol=1e-6)
  # Both members of a pair hold bit-identical results.
  assert got[0][0].tobytes() == got[1][0].tobytes()


def test_all_reduce_is_identical_everywhere_and_in_group_order():
  # 3 participants and a length that splits unevenly into slices.
  text = _module("ROOT ar = f32[1000] all-reduce(x), channel_id=1, "
                 "replica_groups={{2,0,1}}, use_global_device_ids=true, "
                 "to_apply=sum", params="x = f32[1000] parameter(0)",
                 partitions=3)
  xs = _inputs(3, (1000,))
  got = _run(text, [[x] for x in xs])
  want = (xs[2] + xs[0]) + xs[1]
  for (r,) in got:
    np.testing.assert_array_equal(r, want)


@pytest.mark.parametrize("op,dtype,fn", [
    ("add", np.int32, lambda a, b: a + b),
    ("multiply", np.float32, lambda a, b: a * b),
    ("minimum", np.float32, np.minimum),
    ("maximum", np.int64, np.maximum),
    ("and", np.bool_, np.logical_and),
    ("or", np.bool_, np.logical_or),
    ("xor", np.uint8, np.bitwise_xor),
])
def test_all_reduce_reducers(op, dtype, fn):
  ty = {np.int32: "s32", np.float32: "f32", np.int64: "s64",
        np.bool_: "pred", np.uint8: "u8"}[dtype]
  comps = f"""red {{
  a = {ty}[] parameter(0)
  b = {ty}[] parameter(1)
  ROOT r = {ty}[] {op}(b, a)
}}"""
  text = _module(f"ROOT ar = {ty}[5,3] all-reduce(x), replica_groups={{}}, "
                 "to_apply=red", params=f"x = {ty}[5,3] parameter(0)",
                 replicas=4, partitions=1, computations=comps)
  xs = _inputs(4, (5, 3), dtype)
  want = xs[0]
  for x in xs[1:]:
    want = fn(want, x)
  for (r,) in _run(text, [[x] for x in xs]):
    assert r.dtype == np.dtype(dtype)
    np.testing.assert_allclose(r, want.astype(dtype), rtol=1e-6)


def test_all_reduce_through_the_computation():
  # Not a plain binary op: the combiner kernel runs it (a + 2b, folded in
  # group order).
  comps = """red {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  two = f32[] constant(2)
  tb = f32[] multiply(b, two)
  ROOT r = f32[] add(a, tb)
}"""
  text = _module("ROOT ar = f32[8] all-reduce(x), channel_id=1, "
                 "replica_groups={{3,1},{0,2}}, use_global_device_ids=true, "
                 "to_apply=red", computations=comps)
  xs = _inputs(4)
  got = _run(text, [[x] for x in xs])
  for i, (r,) in enumerate(got):
    a, b = (3, 1) if i in (1, 3) else (0, 2)
    np.testing.assert_allclose(r, xs[a] + 2 * xs[b], rtol=1e-6)


def test_all_reduce_bf16_and_variadic():
  comps = """bsum {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
}"""
  text = _module("ROOT ar = (bf16[4], bf16[2,3]) all-reduce(x, y), "
                 "replica_groups={}, to_apply=bsum",
                 params="x = bf16[4] parameter(0)\n  y = bf16[2,3] "
                 "parameter(1)", replicas=2, partitions=1, computations=comps)
  bf = ml_dtypes.bfloat16
  xs = [np.array([1, 2, 3, 4], bf), np.array([0.5, 0.25, 8, -4], bf)]
  ys = [np.full((2, 3), 3, bf), np.arange(6).reshape(2, 3).astype(bf)]
  got = _run(text, [[x, y] for x, y in zip(xs, ys)])
  for x_out, y_out in got:
    assert x_out.dtype == bf
    np.testing.assert_array_equal(x_out.astype(np.float32),
                                  (xs[0].astype(np.float32) +
                                   xs[1].astype(np.float32)))
    np.testing.assert_array_equal(y_out.astype(np.float32),
                                  3 + np.arange(6).reshape(2, 3))


def test_group_modes():
  # 2 replicas x 2 partitions; participant (r, p) has flattened id 2r + p.
  xs = [np.full(2, 10 ** f, np.int32) for f in range(4)]
  cases = {
      # No channel id: replica groups, repeated per partition.
      "replica_groups={{0,1}}": [[0, 2], [1, 3]],
      # Channel id, use_global_device_ids=false: replica groups with every
      # partition of their replicas.
      "channel_id=1, replica_groups={{0},{1}}, "
      "use_global_device_ids=false": [[0, 1], [2, 3]],
      "channel_id=1, replica_groups={{0,3},{2,1}}, "
      "use_global_device_ids=true": [[0, 3], [2, 1]],
  }
  for attrs, groups in cases.items():
    text = _module(f"ROOT ar = s32[2] all-reduce(x), {attrs}, to_apply=isum",
                   params="x = s32[2] parameter(0)", replicas=2,
                   partitions=2)
    got = _run(text, [[x] for x in xs])
    for g in groups:
      for f in g:
        np.testing.assert_array_equal(got[f][0], sum(xs[m] for m in g),
                                      err_msg=attrs)


def test_all_reduce_in_a_loop():
  # The n-th all-reduce of each participant meets the n-th of the others.
  text = _module("""zero = s32[] constant(0)
  init = (s32[], f32[8]) tuple(zero, x)
  ROOT w = (s32[], f32[8]) while(init), condition=cond, body=body""",
                 computations=_REDUCERS + """
cond {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[8] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ar = f32[8] all-reduce(v), channel_id=1, replica_groups={{0,1,2,3}},
    use_global_device_ids=true, to_apply=sum
  ROOT t = (s32[], f32[8]) tuple(j, ar)
}""")
  xs = [np.full(8, i + 1, np.float32) for i in range(4)]
  for i, v in _run(text, [[x] for x in xs]):
    assert i == 3
    np.testing.assert_array_equal(v, np.full(8, 10 * 16, np.float32))


# -- the other collectives -------------------------------------------------------


def test_all_gather():
  text = _module("ROOT ag = (f32[2,12], s32[1,6]) all-gather(x, y), "
                 "channel_id=1, replica_groups={{0,2,1},{3,5,4}}, "
                 "dimensions={1}, use_global_device_ids=true",
                 params="x = f32[2,4] parameter(0)\n  y = s32[1,2] "
                 "parameter(1)", partitions=6)
  xs = _inputs(6, (2, 4))
  ys = [np.full((1, 2), i, np.int32) for i in range(6)]
  got = _run(text, [[x, y] for x, y in zip(xs, ys)])
  for f, (a, b) in enumerate(got):
    g = (0, 2, 1) if f < 3 else (3, 5, 4)
    np.testing.assert_array_equal(a, np.concatenate([xs[m] for m in g], 1))
    np.testing.assert_array_equal(b, np.concatenate([ys[m] for m in g], 1))


def test_reduce_scatter():
  text = _module("ROOT rs = f32[4,2] reduce-scatter(x), channel_id=1, "
                 "replica_groups={{0,1,2,3}}, dimensions={1}, "
                 "use_global_device_ids=true, to_apply=sum",
                 params="x = f32[4,8] parameter(0)")
  xs = _inputs(4, (4, 8))
  total = ((xs[0] + xs[1]) + xs[2]) + xs[3]
  for f, (r,) in enumerate(_run(text, [[x] for x in xs])):
    np.testing.assert_allclose(r, total[:, 2 * f:2 * f + 2], rtol=1e-6)


def test_all_to_all_array_and_tuple_forms():
  text = _module("ROOT a = f32[4,6] all-to-all(x), channel_id=1, "
                 "replica_groups={{0,1}}, dimensions={1}",
                 params="x = f32[4,6] parameter(0)", replicas=2,
                 partitions=2)
  xs = _inputs(4, (4, 6))
  got = _run(text, [[x] for x in xs])
  # Channel id: partition groups, repeated per replica.
  for f, (r,) in enumerate(got):
    g = (0, 1) if f < 2 else (2, 3)
    k = g.index(f)
    np.testing.assert_array_equal(
        r, np.concatenate([xs[m][:, 3 * k:3 * k + 3] for m in g], 1))
  text = _module("ROOT a = (s32[3], s32[3]) all-to-all(x, y), "
                 "replica_groups={{1,0}}",
                 params="x = s32[3] parameter(0)\n  y = s32[3] parameter(1)",
                 replicas=2, partitions=1)
  args = [[np.full(3, 10 * r + k, np.int32) for k in range(2)]
          for r in range(2)]
  got = _run(text, args)
  # Member k of group [1, 0] receives operand k of every member, in group
  # order.
  for r, outs in enumerate(got):
    k = (1, 0).index(r)
    for j, m in enumerate((1, 0)):
      np.testing.assert_array_equal(outs[j], args[m][k])


def test_collective_permute_with_zeros():
  text = _module("ROOT cp = f32[2,2] collective-permute(x), channel_id=1, "
                 "source_target_pairs={{0,2},{2,1},{1,0}}",
                 params="x = f32[2,2] parameter(0)")
  xs = [np.full((2, 2), i + 1, np.float32) for i in range(4)]
  got = [r for (r,) in _run(text, [[x] for x in xs])]
  np.testing.assert_array_equal(got[0], xs[1])
  np.testing.assert_array_equal(got[1], xs[2])
  np.testing.assert_array_equal(got[2], xs[0])
  np.testing.assert_array_equal(got[3], np.zeros((2, 2)))  # nobody sends


def test_collective_permute_cross_replica_repeats_per_partition():
  text = _module("ROOT cp = s32[2] collective-permute(x), "
                 "source_target_pairs={{0,1}}",
                 params="x = s32[2] parameter(0)", replicas=2, partitions=2)
  xs = [np.full(2, f + 1, np.int32) for f in range(4)]
  got = [r for (r,) in _run(text, [[x] for x in xs])]
  # Replica 0 -> replica 1 within each partition: 0 -> 2 and 1 -> 3.
  np.testing.assert_array_equal(got[2], xs[0])
  np.testing.assert_array_equal(got[3], xs[1])
  np.testing.assert_array_equal(got[0], [0, 0])
  np.testing.assert_array_equal(got[1], [0, 0])


def test_collective_broadcast():
  text = _module("ROOT b = f32[3] collective-broadcast(x), channel_id=1, "
                 "replica_groups={{2,0},{1,3}}",
                 params="x = f32[3] parameter(0)")
  xs = [np.full(3, i, np.float32) for i in range(4)]
  got = [r for (r,) in _run(text, [[x] for x in xs])]
  for f, src in ((0, 2), (2, 2), (1, 1), (3, 1)):
    np.testing.assert_array_equal(got[f], xs[src])


# -- against the StableHLO interpreter ---------------------------------------------

_STABLEHLO = """
module @m attributes {mhlo.num_partitions = 4 : i32} {
  func.func @main(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<8x2xf32>,
                                           tensor<2x2xf32>, tensor<A2Axf32>,
                                           tensor<4x2xf32>) {
    %ar = "stablehlo.all_reduce"(%x) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.maximum %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {replica_groups = dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>,
        use_global_device_ids} : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %ag = "stablehlo.all_gather"(%x) {all_gather_dim = 0 : i64,
        replica_groups = dense<[[1, 0], [3, 2]]> : tensor<2x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 2, type = 1>,
        use_global_device_ids} : (tensor<4x2xf32>) -> tensor<8x2xf32>
    %rs = "stablehlo.reduce_scatter"(%x) ({
      ^bb0(%a: tensor<f32>, %b: tensor<f32>):
        %s = stablehlo.add %a, %b : tensor<f32>
        stablehlo.return %s : tensor<f32>
    }) {scatter_dimension = 0 : i64,
        replica_groups = dense<[[0, 1], [2, 3]]> : tensor<2x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 3, type = 1>,
        use_global_device_ids} : (tensor<4x2xf32>) -> tensor<2x2xf32>
    %a2a = "stablehlo.all_to_all"(%x) {split_dimension = 0 : i64,
        concat_dimension = CONCAT : i64, split_count = 4 : i64,
        replica_groups = dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 4, type = 1>}
        : (tensor<4x2xf32>) -> tensor<A2Axf32>
    %cp = "stablehlo.collective_permute"(%x) {
        source_target_pairs = dense<[[0, 3], [3, 2], [1, 0]]>
            : tensor<3x2xi64>,
        channel_handle = #stablehlo.channel_handle<handle = 5, type = 1>}
        : (tensor<4x2xf32>) -> tensor<4x2xf32>
    return %ar, %ag, %rs, %a2a, %cp : tensor<4x2xf32>, tensor<8x2xf32>,
        tensor<2x2xf32>, tensor<A2Axf32>, tensor<4x2xf32>
  }
}
"""

_HLO = _module("""ar = f32[4,2] all-reduce(x), channel_id=1,
    replica_groups={{0,2},{1,3}}, use_global_device_ids=true, to_apply=max
  ag = f32[8,2] all-gather(x), channel_id=2, replica_groups={{1,0},{3,2}},
    dimensions={0}, use_global_device_ids=true
  rs = f32[2,2] reduce-scatter(x), channel_id=3,
    replica_groups={{0,1},{2,3}}, dimensions={0}, use_global_device_ids=true,
    to_apply=sum
  a2a = f32[4,2] all-to-all(x), channel_id=4, replica_groups={{0,1,2,3}},
    dimensions={0}
  cp = f32[4,2] collective-permute(x), channel_id=5,
    source_target_pairs={{0,3},{3,2},{1,0}}
  ROOT t = (f32[4,2], f32[8,2], f32[2,2], f32[4,2], f32[4,2])
    tuple(ar, ag, rs, a2a, cp)""", params="x = f32[4,2] parameter(0)",
               computations=_REDUCERS + """
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}""")


def _interpret(text: str, argument_lists, replicas: int, partitions: int):
  """Runs a StableHLO program on the interpreter's process grid."""
  module = mlir_text.parse_module(text, "<test>")
  grid = interpreter.process_grid.ProcessGrid(replicas, partitions)
  pids = grid.process_ids()
  for pid in pids:
    grid.start(pid)
  out: list = [None] * len(pids)

  def body(k):
    try:
      out[k] = interpreter.Interpreter(module).call(
          "main", argument_lists[k], process=grid.process(pids[k]))
    except BaseException as e:  # pylint: disable=broad-except
      grid.abort(pids[k], e)
      out[k] = e
    finally:
      grid.finish(pids[k])

  threads = [threading.Thread(target=body, args=(k,)) for k in
             range(len(pids))]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  for r in out:
    if isinstance(r, BaseException):
      raise r
  return out


def test_matches_the_stablehlo_interpreter():
  xs = _inputs(4, (4, 2), seed=3)
  want = _interpret(_STABLEHLO.replace("A2A", "4x2").replace("CONCAT", "0"),
                   [[x] for x in xs], 1, 4)
  got = _run(_HLO, [[x] for x in xs])
  for g, w in zip(got, want):
    cpu_testing.assert_same(g, [np.asarray(v) for v in w])


def test_imported_stablehlo_matches_the_interpreter():
  # The same program through the StableHLO -> HLO import, with an
  # all_to_all whose split and concat dimensions differ.
  src = _STABLEHLO.replace("A2A", "1x8").replace("CONCAT", "1")
  module = stablehlo_to_hlo.stablehlo_to_hlo(mlir_text.parse_module(src))
  module.config.num_partitions = 4
  exe = cpu_compiler.compile(module)
  xs = _inputs(4, (4, 2), seed=4)
  want = _interpret(src, [[x] for x in xs], 1, 4)
  for g, w in zip(exe.execute_spmd([[x] for x in xs]), want):
    cpu_testing.assert_same(g, [np.asarray(v) for v in w])


# -- errors ------------------------------------------------------------------------


def test_argument_lists_must_match_the_participants():
  _, exe = cpu_testing.compile_text(_module(
      "ROOT ar = f32[8] all-reduce(x), replica_groups={}, to_apply=sum",
      replicas=4, partitions=1))
  xs = _inputs(4)
  with pytest.raises(support.InvalidArgumentError, match="4 argument lists"):
    exe.execute_spmd([[x] for x in xs[:3]])
  with pytest.raises(support.InvalidArgumentError, match="argument list 2"):
    exe.execute_spmd([[x] for x in xs[:2]] + [[]] + [[xs[3]]])
  with pytest.raises(support.InvalidArgumentError, match="execute_spmd"):
    exe.execute([xs[0]])


@pytest.mark.parametrize("body,match", [
    ("all-reduce(x), channel_id=1, replica_groups={{0,4}}, "
     "use_global_device_ids=true, to_apply=sum", "participant 4"),
    ("all-reduce(x), replica_groups={{0,1}}, to_apply=sum", "replica 1"),
    ("collective-permute(x), channel_id=1, source_target_pairs={{0,7}}",
     "partition 7"),
    ("all-reduce(x), channel_id=1, replica_groups={{0,1},{2}}, "
     "use_global_device_ids=true, to_apply=sum", r"\[3\] are in none"),
    ("all-reduce(x), channel_id=1, replica_groups={{0,1},{1,2,3}}, "
     "use_global_device_ids=true, to_apply=sum", "more than one place"),
])
def test_groups_outside_the_program_are_rejected(body, match):
  with pytest.raises(support.InvalidArgumentError, match=match):
    cpu_testing.compile_text(_module(f"ROOT r = f32[8] {body}"))


def test_a_failing_participant_fails_the_execution():
  text = _module("""c = f32[8] custom-call(x), custom_call_target="check"
  ROOT ar = f32[8] all-reduce(c), channel_id=1, replica_groups={{0,1,2,3}},
    use_global_device_ids=true, to_apply=sum""")
  _, exe = cpu_testing.compile_text(text)

  def check(instr, operands):
    del instr
    if operands[0][0] < 0:
      raise support.DataLossError("participant 2's input is bad")
    return operands[0]

  xs = [np.full(8, 1 if i != 2 else -1, np.float32) for i in range(4)]
  with pytest.raises(support.DataLossError, match="input is bad"):
    exe.execute_spmd([[x] for x in xs], custom_calls={"check": check})
  # The executable still runs.
  xs[2] = np.ones(8, np.float32)
  got = exe.execute_spmd([[x] for x in xs], custom_calls={"check": check})
  np.testing.assert_array_equal(got[3][0], np.full(8, 4, np.float32))


def test_a_missing_participant_times_out_naming_the_collective():
  _, exe = cpu_testing.compile_text(_module(
      "ROOT ar = f32[8] all-reduce(x), channel_id=1, "
      "replica_groups={{0,1,2,3}}, use_global_device_ids=true, "
      "to_apply=sum"))
  execution = collectives.CollectiveExecution(1, 4, timeout_s=0.2)
  for p in range(4):
    execution.start((0, p))
  execution.process((0, 3))  # began, but never reaches the all-reduce
  errors = []

  def body(p):
    try:
      exe.execute([np.ones(8, np.float32)],
                  participant=execution.process((0, p)))
    except support.XlaError as e:
      errors.append(e)
      execution.abort((0, p), e)

  threads = [threading.Thread(target=body, args=(p,)) for p in range(3)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert len(errors) == 3
  deadline = [e for e in errors
              if isinstance(e, support.DeadlineExceededError)]
  assert deadline, errors
  assert "all-reduce 'ar'" in str(deadline[0])
  assert "participant 3 (replica 0, partition 3)" in str(deadline[0])
  assert all(isinstance(e, (support.DeadlineExceededError,
                            support.CancelledError)) for e in errors)


def test_a_participant_that_never_begins_is_named():
  _, exe = cpu_testing.compile_text(_module(
      "ROOT ar = f32[8] all-reduce(x), channel_id=1, "
      "replica_groups={{0,1}}, use_global_device_ids=true, "
      "to_apply=sum", partitions=2))
  execution = collectives.CollectiveExecution(1, 2, timeout_s=0.01,
                                              start_timeout_s=0.2)
  execution.start((0, 0))
  execution.start((0, 1))
  with pytest.raises(support.DeadlineExceededError,
                     match="partition 1.*never began"):
    exe.execute([np.ones(8, np.float32)],
                participant=execution.process((0, 0)))


def test_participants_on_different_paths_fail_instead_of_hanging():
  # Only partition 0 runs the branch with the all-reduce.
  text = _module("""p = u32[] partition-id()
  zero = u32[] constant(0)
  is0 = pred[] compare(p, zero), direction=EQ
  ROOT c = f32[8] conditional(is0, x, x), true_computation=yes,
    false_computation=no""", computations=_REDUCERS + """
yes {
  a = f32[8] parameter(0)
  ROOT ar = f32[8] all-reduce(a), channel_id=1, replica_groups={{0,1,2,3}},
    use_global_device_ids=true, to_apply=sum
}
no {
  ROOT a = f32[8] parameter(0)
}""")
  with pytest.raises(support.InternalError, match="without joining"):
    _run(text, [[x] for x in _inputs(4)], timeout_s=30)


def test_unsupported_forms_are_unimplemented():
  comps = _REDUCERS + """pair {
  a = f32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = s32[] parameter(3)
  s = f32[] add(a, c)
  t = s32[] add(b, d)
  ROOT r = (f32[], s32[]) tuple(s, t)
}"""
  text = _module("ROOT ar = (f32[8], s32[8]) all-reduce(x, y), "
                 "replica_groups={}, to_apply=pair",
                 params="x = f32[8] parameter(0)\n  y = s32[8] parameter(1)",
                 replicas=2, partitions=1, computations=comps)
  with pytest.raises(support.UnimplementedError, match="all-reduce ar"):
    cpu_testing.compile_text(text)


# -- the runtime on buffers that alias --------------------------------------------


def _thunk_run(op, config, ins, outs_alias_ins, n, out_shapes=None):
  """Runs one CollectiveThunk for n participants whose results are their
  operands' buffers (in place) when `outs_alias_ins`."""
  specs_in = [thunk_lib.LeafSpec(k, x.dtype, x.shape)
              for k, x in enumerate(ins[0])]
  base = len(ins[0])
  shapes = out_shapes or [x.shape for x in ins[0]]
  specs_out = [thunk_lib.LeafSpec(base + k, ins[0][k].dtype, s)
               for k, s in enumerate(shapes)]
  thunk = collectives.CollectiveThunk("t", op, config, specs_in, specs_out)
  outs = [[np.zeros(s, ins[0][0].dtype) for s in shapes] for _ in range(n)]

  def run_one(p):
    own = ins[p.flat]
    res = own if outs_alias_ins else outs[p.flat]
    table = np.array([x.__array_interface__["data"][0] for x in own + res],
                     np.uint64)
    thunk.run(collectives.ParticipantState(table, None, None, p))
    return [np.array(r, copy=True) for r in res]

  return collectives.run_participants(run_one, 1, n)


@pytest.mark.parametrize("alias", [False, True])
def test_in_place_results(alias):
  n = 3
  xs = [np.arange(100, dtype=np.float32) * (k + 1) for k in range(n)]
  want = xs[0] + xs[1] + xs[2]
  got = _thunk_run("all-reduce", {"groups": [[0, 1, 2]], "reduce": "add"},
                   [[x.copy()] for x in xs], alias, n)
  for (r,) in got:
    np.testing.assert_array_equal(r, want)
  got = _thunk_run("all-to-all", {"groups": [[0, 1, 2]], "dim": 0},
                   [[x[:99].copy()] for x in xs], alias, n)
  for k, (r,) in enumerate(got):
    np.testing.assert_array_equal(
        r, np.concatenate([x[33 * k:33 * k + 33] for x in xs]))
  got = _thunk_run("collective-permute", {"pairs": [[0, 1], [1, 2], [2, 0]]},
                   [[x.copy()] for x in xs], alias, n)
  for k, (r,) in enumerate(got):
    np.testing.assert_array_equal(r, xs[(k - 1) % n])


@pytest.mark.parametrize("alias", [False, True])
def test_all_reduce_of_many_blocks(alias):
  # Each member's slice spans several reduction blocks and ends in a
  # partial one; results may be the operands themselves.
  n = 3
  size = 3 * collectives._BLOCK_BYTES // 4 + 4321  # pylint: disable=protected-access
  xs = _inputs(n, (size,), seed=3)
  want = (xs[0] + xs[1]) + xs[2]
  got = _thunk_run("all-reduce", {"groups": [[0, 1, 2]], "reduce": "add"},
                   [[x.copy()] for x in xs], alias, n)
  for (r,) in got:
    np.testing.assert_array_equal(r, want)
