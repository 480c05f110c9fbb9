"""Writing a report out: terminal tables, Markdown, CSV, JSON, the closing summary and the HTML page."""
