"""The device language: dtypes, values, memory, builtins and math (see each module)."""
