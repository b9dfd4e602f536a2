package io.librl.bench.spring;

import jakarta.servlet.http.HttpServletRequest;
import java.time.Duration;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * {@code /open} and {@code /half}: {@code ok}. In the floor app (a {@link Floor} bean) each
 * handler first sends librl's RL.ALL for the request's key and answers a bare 429 when it refuses.
 */
@RestController
class Routes {
  static final long OPEN_LIMIT = 1_000_000_000L;
  static final long HALF_LIMIT = 1;
  private static final Duration OPEN_WINDOW = Duration.ofMinutes(1);
  private static final Duration HALF_WINDOW = Duration.ofSeconds(10);
  private static final ResponseEntity<String> OK =
      ResponseEntity.ok().contentType(MediaType.TEXT_PLAIN).body("ok");
  private static final ResponseEntity<String> REFUSED =
      ResponseEntity.status(HttpStatus.TOO_MANY_REQUESTS).build();

  private final Floor floor;

  Routes(ObjectProvider<Floor> floor) {
    this.floor = floor.getIfAvailable();
  }

  @GetMapping("/open")
  ResponseEntity<String> open(HttpServletRequest request) {
    if (floor != null
        && !floor.admits("rl:{ip:" + request.getRemoteAddr() + "}:open", OPEN_LIMIT, OPEN_WINDOW)) {
      return REFUSED;
    }
    return OK;
  }

  @GetMapping("/half")
  ResponseEntity<String> half(HttpServletRequest request) {
    if (floor != null
        && !floor.admits(
            "rl:{header:x-client:" + request.getHeader("X-Client") + "}:half", HALF_LIMIT, HALF_WINDOW)) {
      return REFUSED;
    }
    return OK;
  }
}
