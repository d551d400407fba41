"""Build macros shared by every package of the repository.

`py_pytest` is the one way tests are declared: a `py_test` whose main runs
pytest on the given test file and writes JUnit XML where Bazel asks
($XML_OUTPUT_FILE), so the CI summary can count test cases, not targets.
"""

def py_pytest(name, srcs = None, deps = [], data = [], args = [], **kwargs):
    """A pytest-run py_test. `srcs` defaults to ["<name>.py"]."""
    if srcs == None:
        srcs = [name + ".py"]
    main = Label("//support/testing:pytest_main.py")
    native.py_test(
        name = name,
        srcs = srcs + [main],
        main = main,
        args = ["$(rootpath %s)" % s for s in srcs if s.endswith("_test.py")] + args,
        deps = deps + [Label("//support/testing:pytest_main_lib")],
        data = data,
        python_version = "PY3",
        srcs_version = "PY3",
        **kwargs
    )
