"""The admission review: wire format in, handlers (mutate, validate), Outcome out, errors -> HTTP, decision cache."""
