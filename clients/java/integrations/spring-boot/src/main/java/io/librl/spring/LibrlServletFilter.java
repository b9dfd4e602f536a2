package io.librl.spring;

import io.librl.http.Plan;
import io.librl.http.RateLimiter;
import io.librl.http.Refusals;
import io.librl.http.RequestHeaders;
import io.librl.http.Routes;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.FilterChain;
import jakarta.servlet.ReadListener;
import jakarta.servlet.ServletException;
import jakarta.servlet.ServletInputStream;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletRequestWrapper;
import jakarta.servlet.http.HttpServletResponse;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.context.ApplicationContext;
import org.springframework.web.filter.OncePerRequestFilter;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.servlet.HandlerExecutionChain;
import org.springframework.web.servlet.mvc.method.annotation.RequestMappingHandlerMapping;
import org.springframework.web.util.ContentCachingResponseWrapper;
import org.springframework.web.util.ServletRequestPathUtils;

/**
 * librl for Spring MVC (and any servlet application): a filter that checks each request against
 * the policy file's routes, or a handler's {@link RateLimited} policies, before the handler runs
 * (docs/http.md; docs/http/java.md, Spring MVC). It only moves the request and the response: the
 * decision is {@link RateLimiter}'s. It runs after Spring Security's filter chain, so {@code key:
 * user} counts the authenticated user.
 */
public class LibrlServletFilter extends OncePerRequestFilter implements SmartInitializingSingleton {
  private final RateLimiter limiter;
  private final ServletUserResolver users;
  private final ApplicationContext context;
  private final Handlers handlers = new Handlers();
  private List<RequestMappingHandlerMapping> mappings = List.of();

  public LibrlServletFilter(RateLimiter limiter, ServletUserResolver users, ApplicationContext context) {
    this.limiter = limiter;
    this.users = users;
    this.context = context;
  }

  /** Finds the {@link RateLimited} handlers once every handler mapping is built. */
  @Override
  public void afterSingletonsInstantiated() {
    if (context == null) {
      return;
    }
    mappings =
        List.copyOf(context.getBeansOfType(RequestMappingHandlerMapping.class).values());
    for (RequestMappingHandlerMapping mapping : mappings) {
      for (HandlerMethod method : mapping.getHandlerMethods().values()) {
        handlers.add(limiter, method.getMethod(), method.getBeanType());
      }
    }
  }

  @Override
  protected void doFilterInternal(
      HttpServletRequest original, HttpServletResponse response, FilterChain chain)
      throws ServletException, IOException {
    HttpServletRequest request = original;
    Plan.Request facts =
        new Plan.Request(
            request.getMethod(),
            request.getRequestURI(),
            name -> lines(original.getHeaders(name)),
            request.getRemoteAddr(),
            users.user(request),
            request.getQueryString(),
            request,
            original::getAttribute);
    Plan.Planned planned = limiter.plan(routesFor(request), facts);
    if (planned == null) {
      chain.doFilter(request, response);
      return;
    }
    long bodyLength = -1;
    if (planned.needsBodyLength()) {
      long max = limiter.config().maxBodyBytes();
      bodyLength = request.getContentLengthLong();
      if (bodyLength > max) {
        send(response, limiter.tooLarge(), Map.of());
        return;
      }
      if (bodyLength < 0) {
        // No Content-Length (chunked): read the body to count it, then hand it on.
        byte[] body = readAtMost(request.getInputStream(), max);
        if (body == null) {
          send(response, limiter.tooLarge(), Map.of());
          return;
        }
        bodyLength = body.length;
        request = new BufferedRequest(request, body);
      }
    }
    RateLimiter.Decided decided = await(limiter.decide(planned, facts, bodyLength));
    if (decided.refusal() != null) {
      send(response, decided.refusal(), decided.headers());
      return;
    }
    decided.headers().forEach(response::setHeader);
    if (decided.waitMs() > 0) {
      // Its queue turn (docs/http.md, Lockouts and queues): this request's thread waits, never
      // the shared Redis connection.
      try {
        Thread.sleep(decided.waitMs());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IOException("librl: interrupted while waiting for the request's turn", e);
      }
    }
    if (!decided.holdsSlots()) {
      serve(request, response, chain, decided);
      return;
    }
    // Concurrency slots are held until the response is finished (docs/http.md, Concurrency
    // limits): when the handler returns or throws (a client gone shows as a failed write), or,
    // for an asynchronous response (a stream, server-sent events), when it completes.
    boolean async = false;
    try {
      serve(request, response, chain, decided);
      if (request.isAsyncStarted()) {
        request.getAsyncContext().addListener(new Releasing(limiter, decided));
        async = true;
      }
    } finally {
      if (!async) {
        await(limiter.release(decided));
      }
    }
  }

  /** The handler, and for {@code count: failed} / {@code succeeded} the refund its status decides. */
  private void serve(
      HttpServletRequest request, HttpServletResponse response, FilterChain chain, RateLimiter.Decided decided)
      throws ServletException, IOException {
    if (!decided.settles()) {
      chain.doFilter(request, response);
      return;
    }
    // The refund is made before the response goes out, so the client's next request sees it.
    ContentCachingResponseWrapper held = new ContentCachingResponseWrapper(response);
    try {
      chain.doFilter(request, held);
    } finally {
      await(limiter.settle(decided, held.getStatus()));
      held.copyBodyToResponse();
    }
  }

  /** A header's lines as bytes; most headers have one line, or none. */
  private static List<byte[]> lines(Enumeration<String> values) {
    if (values == null || !values.hasMoreElements()) {
      return List.of();
    }
    byte[] first = RequestHeaders.latin1(values.nextElement());
    if (!values.hasMoreElements()) {
      return List.of(first);
    }
    List<byte[]> lines = new ArrayList<>();
    lines.add(first);
    while (values.hasMoreElements()) {
      lines.add(RequestHeaders.latin1(values.nextElement()));
    }
    return lines;
  }

  /** Releases an asynchronous response's slots when it completes, fails or times out. */
  private record Releasing(RateLimiter limiter, RateLimiter.Decided decided) implements AsyncListener {
    @Override
    public void onComplete(AsyncEvent event) {
      limiter.release(decided);
    }

    @Override
    public void onError(AsyncEvent event) {
      limiter.release(decided);
    }

    @Override
    public void onTimeout(AsyncEvent event) {
      limiter.release(decided);
    }

    @Override
    public void onStartAsync(AsyncEvent event) {
      // Asynchronous processing started again (a new dispatch): keep listening.
      event.getAsyncContext().addListener(this);
    }
  }

  private Routes routesFor(HttpServletRequest request) {
    if (handlers.isEmpty()) {
      return limiter.routes();
    }
    for (RequestMappingHandlerMapping mapping : mappings) {
      Object parsed = request.getAttribute(ServletRequestPathUtils.PATH_ATTRIBUTE);
      try {
        ServletRequestPathUtils.parseAndCache(request);
        HandlerExecutionChain found = mapping.getHandler(request);
        if (found != null && found.getHandler() instanceof HandlerMethod method) {
          Routes own = handlers.of(method.getMethod());
          return own != null ? own : limiter.routes();
        }
      } catch (Exception e) {
        // The dispatcher will answer this request its own way (406, 415...): the file decides.
        return limiter.routes();
      } finally {
        if (parsed == null) {
          ServletRequestPathUtils.clearParsedRequestPath(request);
        } else {
          request.setAttribute(ServletRequestPathUtils.PATH_ATTRIBUTE, parsed);
        }
      }
    }
    return limiter.routes();
  }

  private static void send(HttpServletResponse response, Refusals.Reply reply, Map<String, String> headers)
      throws IOException {
    response.setStatus(reply.status());
    headers.forEach(response::setHeader);
    reply.headers().forEach(response::setHeader);
    response.setContentType(reply.contentType());
    response.setContentLength(reply.body().length);
    response.getOutputStream().write(reply.body());
  }

  private static <T> T await(java.util.concurrent.CompletableFuture<T> future) throws IOException {
    try {
      return future.get();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException("librl: interrupted while deciding", e);
    } catch (ExecutionException e) {
      throw new IOException("librl: " + e.getCause(), e.getCause());
    }
  }

  /** The stream's bytes, or null when there are more than {@code max}. */
  private static byte[] readAtMost(InputStream in, long max) throws IOException {
    ByteArrayOutputStream out = new ByteArrayOutputStream();
    byte[] buffer = new byte[8192];
    long total = 0;
    int n;
    while ((n = in.read(buffer)) >= 0) {
      total += n;
      if (total > max) {
        return null;
      }
      out.write(buffer, 0, n);
    }
    return out.toByteArray();
  }

  /** A request whose body was read to be counted, handed on as it came. */
  private static final class BufferedRequest extends HttpServletRequestWrapper {
    private final byte[] body;

    BufferedRequest(HttpServletRequest request, byte[] body) {
      super(request);
      this.body = body;
    }

    @Override
    public ServletInputStream getInputStream() {
      ByteArrayInputStream in = new ByteArrayInputStream(body);
      return new ServletInputStream() {
        @Override
        public int read() {
          return in.read();
        }

        @Override
        public int read(byte[] b, int off, int len) {
          return in.read(b, off, len);
        }

        @Override
        public boolean isFinished() {
          return in.available() == 0;
        }

        @Override
        public boolean isReady() {
          return true;
        }

        @Override
        public void setReadListener(ReadListener listener) {
          throw new UnsupportedOperationException("librl: the counted body is read blocking");
        }
      };
    }

    @Override
    public java.io.BufferedReader getReader() {
      return new java.io.BufferedReader(
          new java.io.InputStreamReader(
              new ByteArrayInputStream(body),
              getCharacterEncoding() == null
                  ? java.nio.charset.StandardCharsets.UTF_8
                  : java.nio.charset.Charset.forName(getCharacterEncoding())));
    }

    @Override
    public int getContentLength() {
      return body.length;
    }

    @Override
    public long getContentLengthLong() {
      return body.length;
    }
  }
}
