// The live page served at / : one static HTML document (inline CSS and JS, no
// build step, no external resources) that streams a completion and colours
// each token by its origin (server.h's "mtpspec" chunk extension).
#pragma once

namespace mtp::serve {

const char* page_html();

}  // namespace mtp::serve
