"""shapecheck's rules, one module per rule; installed as ``shapecheck.rules``."""
