// The web chat page served at "/" (coordinator/serve/web/chat.html),
// compiled into the binary at configure time so `serve` needs no files
// beside it.
#ifndef FLOTILLA_COORDINATOR_SERVE_CHAT_PAGE_H_
#define FLOTILLA_COORDINATOR_SERVE_CHAT_PAGE_H_

namespace flotilla::coordinator::serve {

const char* ChatPageHtml();

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_CHAT_PAGE_H_
