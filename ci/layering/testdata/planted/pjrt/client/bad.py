import stablehlo
from xla import compiler  # planted: only the CPU plugin may
