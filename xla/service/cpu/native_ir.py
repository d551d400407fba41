"""LLVM IR text shared by the runtime's small hand-written native modules
(native_execute.py's execute entry, blas.py's thread pin): reading words
of an int64 array, and a spin lock on one word."""

# @word(p, i): the i-th int64 of p; @pword(p, i): the same as a pointer.
WORDS = r"""
define internal i64 @word(ptr %p, i64 %i) {
  %q = getelementptr i64, ptr %p, i64 %i
  %v = load i64, ptr %q
  ret i64 %v
}

define internal ptr @pword(ptr %p, i64 %i) {
  %v = call i64 @word(ptr %p, i64 %i)
  %q = inttoptr i64 %v to ptr
  ret ptr %q
}
"""

# @lock(w) / @unlock(w): a spin lock on the int64 at w (0: free).
SPIN_LOCK = r"""
define internal void @lock(ptr %w) {
entry:
  br label %try
try:
  %r = cmpxchg ptr %w, i64 0, i64 1 acquire monotonic
  %ok = extractvalue { i64, i1 } %r, 1
  br i1 %ok, label %done, label %try
done:
  ret void
}

define internal void @unlock(ptr %w) {
  store atomic i64 0, ptr %w release, align 8
  ret void
}
"""
