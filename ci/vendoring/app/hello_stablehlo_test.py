"""Checks the vendored packages from inside the consumer workspace."""

import importlib.util
import unittest

from app import hello_stablehlo
import support


class HelloTest(unittest.TestCase):

  def test_module_is_built_from_vendored_ir(self):
    module = hello_stablehlo.build_module()
    self.assertEqual([op.name for op in module.walk()],
                     ["builtin.module", "func.func", "stablehlo.add",
                      "func.return"])
    self.assertEqual(module.lookup("main").name, "func.func")

  def test_only_support_and_stablehlo_are_vendored(self):
    self.assertIsNone(importlib.util.find_spec("xla"))
    self.assertIsNone(importlib.util.find_spec("pjrt"))
    self.assertTrue(issubclass(support.NotFoundError, LookupError))


if __name__ == "__main__":
  unittest.main()
