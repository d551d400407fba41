#!/bin/sh
# Coverage is not collected through Bazel in this project.
exit 0
