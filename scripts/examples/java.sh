#!/usr/bin/env bash
# scripts/serve-example java: clients/java/integrations/example, a Spring Boot app (Spring MVC on
# Tomcat, Spring Security for the user) behind librl's starter, applying $LIBRL_POLICIES against
# $REDIS_URL or $REDIS_CLUSTER_NODES, on 127.0.0.1:$PORT (HOST to bind elsewhere). Builds the
# client package and the integrations with Maven (clients/java/check.sh build, offline from
# .deps/m2 once scripts/install-deps.sh test has fetched it) when the app is missing or older than
# its sources. LIBRL_WEB=reactive runs the same app on WebFlux and Netty (java-webflux.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/.deps/java-example"
command -v java >/dev/null 2>&1 || { echo "serve-example java: a JDK 17+ is required (scripts/install-deps.sh test)" >&2; exit 1; }
if [ ! -f "$out/classpath" ] || [ -n "$(find "$root/clients/java" -path '*/target' -prune -o \( -name '*.java' -o -name '*.xml' -o -name '*.properties' -o -name '*.imports' -o -name '*.factories' \) -newer "$out/classpath" -print -quit)" ]; then
  echo "serve-example java: building clients/java/integrations/example" >&2
  "$root/clients/java/check.sh" build >&2
fi
# A JVM started for every conformance case: C1 only, the serial collector, and the class-data
# archive check.sh build makes of the app's classes (one per web stack) start it sooner.
cds=()
if [ -f "$out/app-${LIBRL_WEB:-servlet}.jsa" ]; then
  cds=(-XX:SharedArchiveFile="$out/app-${LIBRL_WEB:-servlet}.jsa" -Xlog:cds=off -Xlog:cds+dynamic=off)
fi
exec java -XX:TieredStopAtLevel=1 -XX:+UseSerialGC -Xss512k "${cds[@]}" \
  -cp "$(cat "$out/classpath")" io.librl.example.ExampleApplication
