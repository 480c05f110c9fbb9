"""The words every wing writes with: stored text made safe, table cells and tables, the terminal's width."""
