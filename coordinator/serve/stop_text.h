// OpenAI `stop` strings over streamed text: text is released as soon as it
// cannot be the start of a stop string, and generation ends where one
// appears (the stop string itself is not part of the output).
#ifndef FLOTILLA_COORDINATOR_SERVE_STOP_TEXT_H_
#define FLOTILLA_COORDINATOR_SERVE_STOP_TEXT_H_

#include <string>
#include <vector>

namespace flotilla::coordinator::serve {

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops)
      : stops_(std::move(stops)) {}

  // Text that may be shown after `piece` arrives; `stopped` turns true when
  // a stop string completed (nothing after it is ever returned).
  std::string Feed(const std::string& piece);
  // What is still held back, at the end of generation.
  std::string Flush();
  bool stopped() const { return stopped_; }
  // The stop string that ended it (empty while none has).
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace flotilla::coordinator::serve

#endif  // FLOTILLA_COORDINATOR_SERVE_STOP_TEXT_H_
