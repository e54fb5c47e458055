/*
 * names_bench_lib.cc - C++ code for names_bench to name: a shared library
 * (-O2 -g) of the shapes production C++ has (namespaces, class templates
 * and the standard containers and algorithms inlined into them, lambdas,
 * std::function, shared_ptr), so that its pcs carry long demangled names
 * and inline chains several functions deep. names_bench takes its stacks'
 * pcs from this library's code; nothing here is called.
 */
#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

namespace shop {
namespace catalog {

struct Item {
  std::string sku, title;
  long cents = 0;
  std::vector<std::string> tags;
};

template <typename Key, typename Value> class Index {
public:
  void put(const Key &k, Value v) {
    std::lock_guard<std::mutex> lk(mu_);
    by_key_[k].push_back(std::move(v));
  }
  std::vector<Value> take(const Key &k) {
    std::lock_guard<std::mutex> lk(mu_);
    auto it = by_key_.find(k);
    if (it == by_key_.end()) return {};
    std::vector<Value> out = std::move(it->second);
    by_key_.erase(it);
    return out;
  }

private:
  std::mutex mu_;
  std::map<Key, std::vector<Value>> by_key_;
};

template class Index<std::string, Item>;
template class Index<long, std::shared_ptr<Item>>;

} // namespace catalog

namespace pricing {

template <typename Money> struct Engine {
  std::vector<Money> prices;
  std::unordered_map<std::string, Money> discounts;

  Money total(const std::vector<std::string> &codes) const {
    Money sum = std::accumulate(prices.begin(), prices.end(), Money{});
    for (const auto &c : codes) {
      auto it = discounts.find(c);
      if (it != discounts.end()) sum -= it->second;
    }
    return sum;
  }
  std::vector<Money> ranked() const {
    std::vector<Money> out = prices;
    std::sort(out.begin(), out.end(), [](Money a, Money b) { return a > b; });
    return out;
  }
  void apply(const std::function<Money(Money)> &f) {
    std::transform(prices.begin(), prices.end(), prices.begin(), f);
  }
};

template struct Engine<long>;
template struct Engine<double>;

} // namespace pricing

namespace orders {

struct Order {
  long id;
  std::vector<catalog::Item> items;
};

std::vector<long> order_totals(const std::vector<Order> &orders) {
  std::vector<long> totals;
  totals.reserve(orders.size());
  for (const auto &o : orders)
    totals.push_back(std::accumulate(o.items.begin(), o.items.end(), 0L,
                                     [](long s, const catalog::Item &i) { return s + i.cents; }));
  std::stable_sort(totals.begin(), totals.end());
  return totals;
}

std::map<std::string, std::vector<long>> by_tag(const std::vector<Order> &orders) {
  std::map<std::string, std::vector<long>> out;
  for (const auto &o : orders)
    for (const auto &item : o.items)
      for (const auto &tag : item.tags)
        out[tag].push_back(o.id);
  for (auto &kv : out)
    std::sort(kv.second.begin(), kv.second.end());
  return out;
}

} // namespace orders
} // namespace shop
