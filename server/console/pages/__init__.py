"""One module per console page; each a thin router over the JSON API's services."""
