#!/usr/bin/env bash
# scripts/serve-example java-webflux: the Spring Boot example app of java.sh on WebFlux (librl's
# WebFilter) instead of Spring MVC; the same environment.
set -euo pipefail
LIBRL_WEB=reactive exec bash "$(dirname "$0")/java.sh"
