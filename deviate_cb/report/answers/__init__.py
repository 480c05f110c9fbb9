"""The answers, as data and in words: spread, comparisons, decomposition, plans, problems, stability."""
