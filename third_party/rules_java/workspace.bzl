"""Registers the offline stand-in for @rules_java."""

def repo(path_prefix = ""):
    native.local_repository(
        name = "rules_java",
        path = path_prefix + "third_party/rules_java/repo",
    )
