# PyTorch's "Automatic differentiation with torch.autograd" tutorial, with fixed weights instead of random ones.
import torch

x = torch.ones(5)  # input tensor
y = torch.zeros(3)  # expected output
w = (torch.arange(15.0).reshape(5, 3) / 10 - 0.7).requires_grad_()
b = torch.tensor([0.1, -0.2, 0.3], requires_grad=True)
z = torch.matmul(x, w) + b
loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
print("Gradient function for z is set:", z.grad_fn is not None)
print("Gradient function for loss is set:", loss.grad_fn is not None)
loss.backward()
print([[round(v, 6) for v in row] for row in w.grad.tolist()])
print([round(v, 6) for v in b.grad.tolist()])
z = torch.matmul(x, w) + b
print(z.requires_grad)
with torch.no_grad():
    z = torch.matmul(x, w) + b
print(z.requires_grad)
z = torch.matmul(x, w) + b
z_det = z.detach()
print(z_det.requires_grad)
inp = torch.eye(4, 5, requires_grad=True)
out = (inp + 1).pow(2).t()
out.backward(torch.ones_like(out), retain_graph=True)
print(f"First call\n{inp.grad.tolist()}")
out.backward(torch.ones_like(out), retain_graph=True)
print(f"\nSecond call\n{inp.grad.tolist()}")
inp.grad.zero_()
out.backward(torch.ones_like(out))
print(f"\nCall after zeroing gradients\n{inp.grad.tolist()}")
with torch.inference_mode():
    print("inference_mode requires_grad", (inp * 2).requires_grad)
