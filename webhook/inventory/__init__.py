"""The inventory the request path reads: static files, live list/watch, the kube client."""
