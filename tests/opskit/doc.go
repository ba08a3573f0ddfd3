// Package opskit tests the operations kit in deploy/ with the tools that
// consume it: the Prometheus alert rules with promtool (check rules, and the
// unit tests in alerts_test.yml), and the Helm chart with helm (lint, and
// template, whose manifests are held to the executor's flags, probes and
// ports). The tools come from .ci/run: promtool from Debian's prometheus
// package, helm v4 built with go install into a cache directory on PATH (or
// named by TOOLEXEC_HELM). Without one, a test skips — or, under CI=true,
// fails. Whether the dashboard and the rules query only metrics the executor
// exports is checked in cmd/executor, which can see its registry.
package opskit
