"""Registers the offline stand-in for @rules_cc."""

def repo(path_prefix = ""):
    native.local_repository(
        name = "rules_cc",
        path = path_prefix + "third_party/rules_cc/repo",
    )
