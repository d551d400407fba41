"""Registers the offline stand-in for @remote_coverage_tools."""

def repo(path_prefix = ""):
    native.local_repository(
        name = "remote_coverage_tools",
        path = path_prefix + "third_party/remote_coverage_tools/repo",
    )
