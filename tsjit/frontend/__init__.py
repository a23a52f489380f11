"""Python source -> LLVM IR: parsing, the AST visitor, SSA construction, calls, kernel entry."""
