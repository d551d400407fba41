"""@openxla: the monorepo's support/ and stablehlo/ packages only.

A repository rule links just those two components (plus the build glue they
load) into an external repository, so this consumer builds against
StableHLO without xla/ or pjrt/ being present at all.
"""

_COMPONENTS = ["support", "stablehlo"]
_GLUE = ["third_party", "requirements.txt", "requirements-test.txt"]

def _openxla_subset_impl(ctx):
    src = ctx.path(ctx.attr.workspace_file).dirname
    for part in ctx.attr.path.split("/"):
        if part == "..":
            src = src.dirname
        elif part and part != ".":
            src = src.get_child(part)
    for name in _COMPONENTS + _GLUE:
        child = src.get_child(name)
        if not child.exists:
            fail("vendored openxla tree lacks %s (looked in %s)" % (name, src))
        ctx.symlink(child, name)
    ctx.file("WORKSPACE", 'workspace(name = "openxla")\n')
    ctx.file("BUILD", 'exports_files(["requirements.txt", "requirements-test.txt"])\n')

openxla_subset = repository_rule(
    implementation = _openxla_subset_impl,
    attrs = {
        "path": attr.string(mandatory = True),
        "workspace_file": attr.label(default = Label("//:WORKSPACE")),
    },
    local = True,
)

def repo():
    # The monorepo root, relative to this consumer workspace.
    openxla_subset(name = "openxla", path = "../..")
