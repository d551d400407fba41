"""The one place that registers every external dependency of the workspace.

A consumer that vendors this repository calls `openxla_dependencies` from its
own WORKSPACE, passing `path_prefix` = where this repository sits relative to
the consumer's workspace root (with a trailing slash).
"""

load("//third_party/pypi:workspace.bzl", pypi = "repo")
load("//third_party/remote_coverage_tools:workspace.bzl", remote_coverage_tools = "repo")
load("//third_party/rules_cc:workspace.bzl", rules_cc = "repo")
load("//third_party/rules_java:workspace.bzl", rules_java = "repo")

def openxla_dependencies(path_prefix = ""):
    # Bazel's embedded tools load @rules_cc, @rules_java and
    # @remote_coverage_tools even for Python-only builds; these stand-ins keep
    # every build offline.
    rules_cc(path_prefix)
    rules_java(path_prefix)
    remote_coverage_tools(path_prefix)
    # Python packages come from the interpreter's site-packages, pinned by
    # requirements.txt; @pypi gives each one a label to depend on.
    pypi(path_prefix)
