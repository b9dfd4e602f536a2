package io.librl.example;

import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RestController;

/** Every path and method: {@code ok}, with the status {@code X-Conformance-Status} asks for. */
@RestController
public class OkController {
  @RequestMapping("/**")
  public ResponseEntity<String> ok(
      @RequestHeader(name = "X-Conformance-Status", required = false) Integer status) {
    return ResponseEntity.status(status == null ? 200 : status)
        .contentType(MediaType.TEXT_PLAIN)
        .body("ok");
  }
}
