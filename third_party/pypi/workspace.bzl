"""@pypi: one py_library label per pinned Python requirement.

The packages themselves are installed by pip from requirements*.txt into the
interpreter Bazel runs; this repository rule only gives them labels, so that
BUILD files state their third-party dependencies (and the wheel builder and
layering checks can read them). It never downloads anything.
"""

def _normalize(name):
    return name.lower().replace("-", "_").replace(".", "_")

def _pypi_impl(ctx):
    names = []
    for req_label in ctx.attr.requirements:
        text = ctx.read(ctx.path(req_label))
        for line in text.splitlines():
            line = line.split("#")[0].strip()
            if not line or line.startswith("-"):
                continue
            for sep in ["==", ">=", "<=", "~=", "<", ">", "["]:
                line = line.split(sep)[0]
            names.append(_normalize(line.strip()))
    build = ['package(default_visibility = ["//visibility:public"])', ""]
    for name in sorted({n: None for n in names}.keys()):
        build.append('py_library(name = "%s", srcs = [])' % name)
    ctx.file("WORKSPACE", 'workspace(name = "%s")\n' % ctx.name)
    ctx.file("BUILD", "\n".join(build) + "\n")

pypi_repository = repository_rule(
    implementation = _pypi_impl,
    attrs = {"requirements": attr.label_list(allow_files = True)},
    local = True,
)

def repo(path_prefix = ""):
    # Labels name files of the repository that defines the rule call, so the
    # requirement files resolve correctly when this workspace is vendored.
    pypi_repository(
        name = "pypi",
        requirements = [
            Label("//:requirements.txt"),
            Label("//:requirements-test.txt"),
        ],
    )
