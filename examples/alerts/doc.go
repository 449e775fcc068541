// Package alerts holds sample Prometheus alert rules for retrygate
// (retrygate-alerts.yml) and their promtool unit tests
// (retrygate-alerts_test.yml). It has no Go API: its tests run promtool
// check rules and promtool test rules, check that every alert has a
// firing and a silent case, that the test series are shaped like the
// series package gate/gateprom exports, and that the rules' earlier,
// broken expressions fail those tests.
//
// The tests skip where promtool (Debian package prometheus) is not on
// PATH, unless RETRYGATE_REQUIRE_PROMTOOL=1, where they fail instead; CI
// sets it.
package alerts
