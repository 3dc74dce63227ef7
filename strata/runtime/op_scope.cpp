#include "strata/runtime/op_scope.h"

namespace strata {

namespace {
thread_local const char* running_op = nullptr;
}  // namespace

const char* current_op() { return running_op; }

OpScope::OpScope(const char* op) : previous_(running_op) { running_op = op; }
OpScope::~OpScope() { running_op = previous_; }

}  // namespace strata
