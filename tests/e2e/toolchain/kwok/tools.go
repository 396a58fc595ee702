//go:build tools

// The command that tests/e2e/build.py builds; this file is never compiled.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
