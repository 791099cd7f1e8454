// The router's HTTP access log: one line per exchange (HttpServer::Options::on_complete), in the
// spirit of a web server's common log, never with a body: the client, the request line, the
// status, the response bytes, the time taken, and whether the client left first.
//
//   access 10.0.0.7:51512 "POST /v1/chat/completions" 200 1834 B 412.7 ms
//   access 10.0.0.7:51514 "POST /v1/completions" 200 96 B 80.2 ms client left
//
// The path comes from the client: bytes outside printable ASCII are written as \xNN, so that a
// line cannot be forged or broken by what it records.
#ifndef PAGELLM_ROUTER_HTTP_ACCESS_LOG_H_
#define PAGELLM_ROUTER_HTTP_ACCESS_LOG_H_

#include <string>

#include "router/http/http_server.h"

namespace pagellm {

// The line, without the logger's prefix.
std::string FormatAccess(const HttpAccess& access);
// Logs FormatAccess at info level. Thread-safe.
void LogAccess(const HttpAccess& access);

}  // namespace pagellm

#endif  // PAGELLM_ROUTER_HTTP_ACCESS_LOG_H_
