"""One module per console page; each a thin router over the JSON API's services, with its
entry in the menu (``NAV``, a ``server.console.nav.NavEntry``, or None) beside its
``router``; ``server.console.app.PAGES`` lists them."""
