#include "agent/net/munge_auth.h"

#include <munge.h>

#include <cstdlib>
#include <memory>

namespace triage::agent {

namespace {

struct CtxDeleter {
  void operator()(munge_ctx_t c) const { munge_ctx_destroy(c); }
};
using Ctx = std::unique_ptr<std::remove_pointer_t<munge_ctx_t>, CtxDeleter>;

Ctx make_ctx(const std::string& socket, std::string& error) {
  Ctx ctx(munge_ctx_create());
  if (!ctx) {
    error = "cannot create a munge context";
    return nullptr;
  }
  if (!socket.empty()) {
    const munge_err_t e = munge_ctx_set(ctx.get(), MUNGE_OPT_SOCKET, socket.c_str());
    if (e != EMUNGE_SUCCESS) {
      error = std::string("munge socket ") + socket + ": " + munge_strerror(e);
      return nullptr;
    }
  }
  return ctx;
}

}  // namespace

std::optional<std::string> munge_credential(const std::string& socket, const std::string& payload,
                                            std::string& error) {
  Ctx ctx = make_ctx(socket, error);
  if (!ctx) return std::nullopt;
  char* cred = nullptr;
  const munge_err_t e =
      munge_encode(&cred, ctx.get(), payload.data(), static_cast<int>(payload.size()));
  if (e != EMUNGE_SUCCESS) {
    const char* why = munge_ctx_strerror(ctx.get());
    error = std::string("munge encode: ") + (why != nullptr ? why : munge_strerror(e));
    std::free(cred);
    return std::nullopt;
  }
  std::string out(cred);
  std::free(cred);
  return out;
}

MungeDecoded munge_verify(const std::string& socket, const std::string& credential) {
  MungeDecoded d;
  Ctx ctx = make_ctx(socket, d.error);
  if (!ctx) return d;
  void* buf = nullptr;
  int len = 0;
  uid_t uid = 0;
  gid_t gid = 0;
  const munge_err_t e = munge_decode(credential.c_str(), ctx.get(), &buf, &len, &uid, &gid);
  if (e != EMUNGE_SUCCESS) {
    const char* why = munge_ctx_strerror(ctx.get());
    d.error = std::string("munge decode: ") + (why != nullptr ? why : munge_strerror(e));
    std::free(buf);
    return d;
  }
  if (buf != nullptr && len > 0)
    d.payload.assign(static_cast<const char*>(buf), static_cast<size_t>(len));
  std::free(buf);
  d.ok = true;
  d.uid = uid;
  d.gid = gid;
  return d;
}

}  // namespace triage::agent
