package io.librl.example;

import java.time.Duration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnWebApplication;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RestController;
import reactor.core.publisher.Mono;

/**
 * Every path and method: {@code ok}, with the status {@code X-Conformance-Status} asks for, after
 * {@code X-Conformance-Delay-Ms}, or failing with {@code X-Conformance-Fail: 1} the way a Spring
 * handler fails: it throws, and Spring answers 500 (conformance/README.md, What the app behind the
 * middleware does).
 */
public final class OkController {
  private OkController() {}

  /** Spring MVC: the servlet thread sleeps, as a blocking handler would. */
  @RestController
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.SERVLET)
  static class Servlet {
    @RequestMapping("/**")
    ResponseEntity<String> ok(
        @RequestHeader(name = "X-Conformance-Status", required = false) Integer status,
        @RequestHeader(name = "X-Conformance-Delay-Ms", required = false) Long delayMs,
        @RequestHeader(name = "X-Conformance-Fail", required = false) String fail)
        throws InterruptedException {
      if (delayMs != null && delayMs > 0) {
        Thread.sleep(delayMs);
      }
      failIfAsked(fail);
      return answer(status);
    }
  }

  /** WebFlux: an asynchronous delay, so a slow request holds no event-loop thread. */
  @RestController
  @ConditionalOnWebApplication(type = ConditionalOnWebApplication.Type.REACTIVE)
  static class Reactive {
    @RequestMapping("/**")
    Mono<ResponseEntity<String>> ok(
        @RequestHeader(name = "X-Conformance-Status", required = false) Integer status,
        @RequestHeader(name = "X-Conformance-Delay-Ms", required = false) Long delayMs,
        @RequestHeader(name = "X-Conformance-Fail", required = false) String fail) {
      Mono<Long> wait = delayMs != null && delayMs > 0 ? Mono.delay(Duration.ofMillis(delayMs)) : Mono.just(0L);
      return wait.map(
          x -> {
            failIfAsked(fail);
            return answer(status);
          });
    }
  }

  private static void failIfAsked(String fail) {
    if ("1".equals(fail)) {
      throw new IllegalStateException("X-Conformance-Fail: the handler fails");
    }
  }

  private static ResponseEntity<String> answer(Integer status) {
    return ResponseEntity.status(status == null ? 200 : status).contentType(MediaType.TEXT_PLAIN).body("ok");
  }
}
