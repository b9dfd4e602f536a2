package io.librl.spring;

import io.librl.http.Plan;
import io.librl.http.RateLimiter;
import io.librl.http.Refusals;
import io.librl.http.RequestHeaders;
import io.librl.http.Routes;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.context.ApplicationContext;
import org.springframework.core.Ordered;
import org.springframework.core.io.buffer.DataBuffer;
import org.springframework.core.io.buffer.DataBufferLimitException;
import org.springframework.core.io.buffer.DataBufferUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.server.reactive.ServerHttpRequest;
import org.springframework.http.server.reactive.ServerHttpRequestDecorator;
import org.springframework.http.server.reactive.ServerHttpResponse;
import org.springframework.web.method.HandlerMethod;
import org.springframework.web.reactive.result.method.annotation.RequestMappingHandlerMapping;
import org.springframework.web.server.ServerWebExchange;
import org.springframework.web.server.WebFilter;
import org.springframework.web.server.WebFilterChain;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * librl for Spring WebFlux: a {@code WebFilter} that checks each request against the policy
 * file's routes, or a handler's {@link RateLimited} policies, before the handler runs
 * (docs/http.md; docs/http/java.md, WebFlux). It never blocks: the Redis exchange is Lettuce's,
 * asynchronous. It runs after Spring Security's WebFilter chain, so {@code key: user} counts the
 * authenticated user.
 */
public class LibrlWebFilter implements WebFilter, Ordered, SmartInitializingSingleton {
  private final RateLimiter limiter;
  private final ReactiveUserResolver users;
  private final ApplicationContext context;
  private final int order;
  private final Handlers handlers = new Handlers();
  private List<RequestMappingHandlerMapping> mappings = List.of();

  public LibrlWebFilter(
      RateLimiter limiter, ReactiveUserResolver users, ApplicationContext context, int order) {
    this.limiter = limiter;
    this.users = users;
    this.context = context;
    this.order = order;
  }

  @Override
  public int getOrder() {
    return order;
  }

  /** Finds the {@link RateLimited} handlers once every handler mapping is built. */
  @Override
  public void afterSingletonsInstantiated() {
    if (context == null) {
      return;
    }
    mappings = List.copyOf(context.getBeansOfType(RequestMappingHandlerMapping.class).values());
    for (RequestMappingHandlerMapping mapping : mappings) {
      for (HandlerMethod method : mapping.getHandlerMethods().values()) {
        handlers.add(limiter, method.getMethod(), method.getBeanType());
      }
    }
  }

  @Override
  public Mono<Void> filter(ServerWebExchange exchange, WebFilterChain chain) {
    return Mono.zip(routesFor(exchange), users.user(exchange).map(List::of).defaultIfEmpty(List.of()))
        .flatMap(
            found -> {
              String user = found.getT2().isEmpty() ? null : found.getT2().get(0);
              return check(exchange, chain, found.getT1(), user);
            });
  }

  private Mono<Void> check(ServerWebExchange exchange, WebFilterChain chain, Routes routes, String user) {
    ServerHttpRequest request = exchange.getRequest();
    HttpHeaders headers = request.getHeaders();
    InetSocketAddress remote = request.getRemoteAddress();
    String peer =
        remote == null || remote.getAddress() == null ? null : remote.getAddress().getHostAddress();
    Plan.Request facts =
        new Plan.Request(
            request.getMethod().name(),
            request.getURI().getRawPath(),
            name -> {
              List<byte[]> lines = new ArrayList<>();
              List<String> values = headers.get(name);
              if (values != null) {
                for (String v : values) {
                  lines.add(RequestHeaders.latin1(v));
                }
              }
              return lines;
            },
            peer,
            user,
            request.getURI().getRawQuery(),
            exchange,
            exchange.getAttributes()::get);
    Plan.Planned planned = limiter.plan(routes, facts);
    if (planned == null) {
      return chain.filter(exchange);
    }
    if (!planned.needsBodyLength()) {
      return decide(exchange, chain, planned, facts, -1);
    }
    long max = limiter.config().maxBodyBytes();
    long declared = headers.getContentLength();
    if (declared > max) {
      return send(exchange.getResponse(), limiter.tooLarge(), Map.of());
    }
    if (declared >= 0) {
      return decide(exchange, chain, planned, facts, declared);
    }
    // No Content-Length (chunked): read the body to count it, then hand it on.
    int limit = (int) Math.min(Integer.MAX_VALUE - 1, max);
    return DataBufferUtils.join(request.getBody(), limit)
        .map(
            buffer -> {
              byte[] body = new byte[buffer.readableByteCount()];
              buffer.read(body);
              DataBufferUtils.release(buffer);
              return body;
            })
        .defaultIfEmpty(new byte[0])
        .flatMap(
            body -> {
              ServerHttpRequest replay =
                  new ServerHttpRequestDecorator(request) {
                    @Override
                    public Flux<DataBuffer> getBody() {
                      return Flux.just(exchange.getResponse().bufferFactory().wrap(body));
                    }
                  };
              return decide(
                  exchange.mutate().request(replay).build(), chain, planned, facts, body.length);
            })
        .onErrorResume(
            DataBufferLimitException.class, e -> send(exchange.getResponse(), limiter.tooLarge(), Map.of()));
  }

  private Mono<Void> decide(
      ServerWebExchange exchange, WebFilterChain chain, Plan.Planned planned, Plan.Request facts, long bodyLength) {
    return Mono.fromFuture(() -> limiter.decide(planned, facts, bodyLength))
        .flatMap(
            decided -> {
              ServerHttpResponse response = exchange.getResponse();
              if (decided.refusal() != null) {
                return send(response, decided.refusal(), decided.headers());
              }
              decided.headers().forEach(response.getHeaders()::set);
              // Its queue turn (docs/http.md, Lockouts and queues): an asynchronous delay.
              Mono<Void> served =
                  decided.waitMs() > 0
                      ? Mono.delay(Duration.ofMillis(decided.waitMs()))
                          .then(Mono.defer(() -> serve(exchange, chain, decided)))
                      : serve(exchange, chain, decided);
              if (decided.holdsSlots()) {
                // Concurrency slots are held until the response is finished (docs/http.md,
                // Concurrency limits): written, failed, or cancelled by a client gone first.
                return served.doFinally(signal -> limiter.release(decided));
              }
              return served;
            });
  }

  /** The handler, and for {@code count: failed} / {@code succeeded} the refund its status decides. */
  private Mono<Void> serve(ServerWebExchange exchange, WebFilterChain chain, RateLimiter.Decided decided) {
    if (decided.settles()) {
      // The refund is made before the response goes out, so the client's next request sees it.
      ServerHttpResponse response = exchange.getResponse();
      response.beforeCommit(
          () -> {
            HttpStatusCode status = response.getStatusCode();
            return Mono.fromFuture(() -> limiter.settle(decided, status == null ? 200 : status.value()));
          });
    }
    return chain.filter(exchange);
  }

  private Mono<Routes> routesFor(ServerWebExchange exchange) {
    if (handlers.isEmpty()) {
      return Mono.just(limiter.routes());
    }
    return Flux.fromIterable(mappings)
        .concatMap(m -> m.getHandler(exchange).onErrorResume(e -> Mono.empty()))
        .next()
        .map(
            handler -> {
              Routes own =
                  handler instanceof HandlerMethod method ? handlers.of(method.getMethod()) : null;
              return own != null ? own : limiter.routes();
            })
        .defaultIfEmpty(limiter.routes());
  }

  private static Mono<Void> send(ServerHttpResponse response, Refusals.Reply reply, Map<String, String> headers) {
    response.setStatusCode(HttpStatusCode.valueOf(reply.status()));
    headers.forEach(response.getHeaders()::set);
    reply.headers().forEach(response.getHeaders()::set);
    response.getHeaders().set(HttpHeaders.CONTENT_TYPE, reply.contentType());
    response.getHeaders().setContentLength(reply.body().length);
    return response.writeWith(Mono.just(response.bufferFactory().wrap(reply.body())));
  }
}
